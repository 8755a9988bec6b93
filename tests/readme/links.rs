//! The docs' links: every relative link of the README and of `docs/`, and every `docs/` page
//! they name, exists.
use std::path::Path;

/// Every relative link of the README and of `docs/`, and every `docs/` page they name, exists.
#[test]
fn every_link_of_the_docs_leads_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lies in the workspace");
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("a docs entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        let folder = page.parent().expect("a folder");
        for target in markdown_links(&text) {
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            assert!(
                folder.join(path).exists(),
                "{}: the link `{target}` leads nowhere",
                page.display()
            );
        }
        for named in text.split(|c: char| c.is_whitespace() || "`()[]|,;:".contains(c)) {
            if let Some(rest) = named.strip_prefix("docs/")
                && rest.ends_with(".md")
            {
                assert!(
                    root.join("docs").join(rest).exists(),
                    "{}: names docs/{rest}, which does not exist",
                    page.display()
                );
            }
        }
    }
    assert!(checked >= 10, "only {checked} links were found");
}

/// The targets of the Markdown links `[text](target)` of `text`.
fn markdown_links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) if !after[..end].contains(char::is_whitespace) => {
                found.push(after[..end].to_owned());
                rest = &after[end..];
            }
            _ => rest = after,
        }
    }
    found
}
