//! The protected names: what, in the files folder and in the repositories nested in it,
//! something outside the sandbox later runs or obeys without the user running it on purpose.
//! `docs/sandbox.md` ("Protected paths") lists the same, with why each.

/// What stands in for a protected name that does not exist, so that a program cannot make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// An empty folder: invisible to git, and harmless to every tool that reads the name.
    Folder,
    /// An empty file: for a name a program reads as a file and fails on as a folder (git on
    /// `.git/config`, and on `~/.gitconfig` when the files folder is the home folder).
    File,
    /// Nothing: the name is protected when it exists, and made freely when it does not (what a
    /// program makes there is obeyed by nothing the user runs by themselves).
    None,
}

/// A name at the top of the files folder (and of each repository nested in it).
#[derive(Debug, Clone, Copy)]
pub struct TopName {
    /// The name.
    pub name: &'static str,
    /// What stands in for it at the top of the files folder when it is missing (in a nested
    /// repository, only what exists is protected).
    pub missing: Placeholder,
}

const fn folder(name: &'static str) -> TopName {
    TopName {
        name,
        missing: Placeholder::Folder,
    }
}

/// The names protected at the top of the files folder and of each nested repository, besides
/// `.git` and `.github` (whose parts are protected one by one: [`GIT_PARTS`], [`WORKFLOWS`]).
pub const TOP: &[TopName] = &[
    // Claude Code: project MCP servers, settings with hooks and permissions, commands, agents.
    // (A folder stands in for a missing `.mcp.json`: an empty file would be committed by the
    // agent's own `git add -A`; Claude Code says it is no file, and reads no server from it.)
    folder(".mcp.json"),
    folder(".claude"),
    // Editors: tasks that run when the folder opens, settings that name programs to run.
    folder(".vscode"),
    folder(".idea"),
    folder(".cursor"),
    folder(".devcontainer"),
    // Dev Containers reads a top `.devcontainer.json` as it reads the folder's file
    // (`initializeCommand` runs on the host).
    folder(".devcontainer.json"),
    // Other hosts' project settings: servers, trust, hooks, skills.
    folder(".gemini"),
    folder(".codex"),
    folder(".agents"),
    // direnv runs it on `cd`; git reads `.gitmodules` (submodule URLs and paths).
    folder(".envrc"),
    folder(".gitmodules"),
    // Shell and tool start-up files (should the files folder be a home folder).
    folder(".gitconfig"),
    folder(".bashrc"),
    folder(".bash_profile"),
    folder(".zshrc"),
    folder(".zprofile"),
    folder(".profile"),
    folder(".ripgreprc"),
];

/// The start-up files of a home folder: when the files folder is the home folder itself, an
/// empty file stands in for a missing one (git fails on a `.gitconfig` folder, a shell
/// complains of a `.bashrc` folder); elsewhere nothing reads them, and a folder does.
pub const HOME_FILES: &[&str] = &[
    ".gitconfig",
    ".bashrc",
    ".bash_profile",
    ".zshrc",
    ".zprofile",
    ".profile",
];

/// The repository's folder at the top of the files folder. Missing, it is an empty read-only
/// folder: no `git init` makes a repository there that the user's git would obey.
pub const GIT: &str = ".git";

/// GitHub's folder; its `workflows` run in CI with the repository's secrets once pushed.
pub const GITHUB: &str = ".github";
/// Inside [`GITHUB`].
pub const WORKFLOWS: &str = "workflows";

/// A part of a repository's git folder.
#[derive(Debug, Clone, Copy)]
pub struct GitPart {
    /// The name inside the git folder.
    pub name: &'static str,
    /// What stands in for it when it is missing.
    pub missing: Placeholder,
}

/// The parts of a git folder that make the user's git run something: its configuration
/// (`core.fsmonitor`, `core.hooksPath`, `core.sshCommand`, aliases, filters, includes), its
/// hooks, the submodules' and the linked worktrees' git folders (each with a configuration and
/// hooks of its own), and a worktree's own configuration and common folder.
pub const GIT_PARTS: &[GitPart] = &[
    GitPart {
        name: "config",
        missing: Placeholder::File,
    },
    GitPart {
        name: "hooks",
        missing: Placeholder::Folder,
    },
    GitPart {
        name: "modules",
        missing: Placeholder::None,
    },
    GitPart {
        name: "worktrees",
        missing: Placeholder::None,
    },
    // An empty file stands in for a missing one: with `extensions.worktreeConfig` set (by the
    // user, or by `git sparse-checkout`), git obeys a `config.worktree` a program made as it
    // obeys `config`; without it, git does not read the file.
    GitPart {
        name: "config.worktree",
        missing: Placeholder::File,
    },
    GitPart {
        name: "commondir",
        missing: Placeholder::None,
    },
];

/// Folders the search for nested repositories does not enter: dependencies and build output,
/// where no repository of the user's lives and thousands of folders do.
pub const NOT_SEARCHED: &[&str] = &["node_modules", "target", ".venv", "__pycache__"];

/// How many levels below the files folder nested repositories are looked for (`a/b/c/.git`).
pub const NESTED_LEVELS: usize = 3;
