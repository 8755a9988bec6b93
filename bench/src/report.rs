//! The printed table: sections of rows with n, median, p90, target and whether it was met.

use crate::stats::Summary;

/// One line of the table.
pub struct Row {
    label: String,
    n: Option<usize>,
    median: String,
    p90: String,
    /// The target and whether it was met.
    target: Option<(String, bool)>,
}

impl Row {
    /// A row of timed samples, in milliseconds.
    pub fn times(label: &str, s: &Summary) -> Row {
        Row {
            label: label.into(),
            n: Some(s.n),
            median: format!("{:.3} ms", crate::stats::ms(s.median)),
            p90: format!("{:.3} ms", crate::stats::ms(s.p90)),
            target: None,
        }
    }

    /// A row of timed samples with a target: `met` says whether the median meets it.
    pub fn times_target(label: &str, s: &Summary, target: &str, met: bool) -> Row {
        Row {
            target: Some((target.into(), met)),
            ..Row::times(label, s)
        }
    }

    /// A row of a derived figure.
    pub fn value(label: &str, median: String, p90: String, target: Option<(String, bool)>) -> Row {
        Row {
            label: label.into(),
            n: None,
            median,
            p90,
            target,
        }
    }

    /// A derived figure over `n` samples.
    pub fn value_n(
        label: &str,
        n: usize,
        median: String,
        p90: String,
        target: Option<(String, bool)>,
    ) -> Row {
        Row {
            n: Some(n),
            ..Row::value(label, median, p90, target)
        }
    }
}

enum Entry {
    Section(String),
    Row(Row),
    Note(String),
}

/// The whole report, printed at the end so that printing does not disturb the timings.
pub struct Report {
    title: String,
    entries: Vec<Entry>,
}

impl Report {
    pub fn new(title: String) -> Report {
        Report {
            title,
            entries: Vec::new(),
        }
    }

    pub fn section(&mut self, title: &str) {
        self.entries.push(Entry::Section(title.into()));
    }

    pub fn row(&mut self, row: Row) {
        self.entries.push(Entry::Row(row));
    }

    pub fn note(&mut self, text: &str) {
        self.entries.push(Entry::Note(text.into()));
    }

    pub fn print(&self) {
        println!("{}", self.title);
        println!(
            "  {:<48} {:>5} {:>12} {:>12}  {:<11} met",
            "", "n", "median", "p90", "target"
        );
        for entry in &self.entries {
            match entry {
                Entry::Section(title) => println!("\n{title}"),
                Entry::Note(text) => println!("\n{text}"),
                Entry::Row(row) => {
                    let n = row.n.map(|n| n.to_string()).unwrap_or_default();
                    let (target, met) = match &row.target {
                        Some((target, true)) => (target.as_str(), "yes"),
                        Some((target, false)) => (target.as_str(), "NO"),
                        None => ("", ""),
                    };
                    println!(
                        "  {:<48} {:>5} {:>12} {:>12}  {:<11} {}",
                        row.label, n, row.median, row.p90, target, met
                    );
                }
            }
        }
    }
}
