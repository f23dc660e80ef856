//! The documents checked against what they describe, by reading both as text: the rustdoc
//! of `src/` links the documents of record (`redlease::guide`) instead of naming their
//! files; its examples compile for a user, who has `redlease` and not its dependencies;
//! `docs/design.md` lists every name `lib.rs` exports; and every shell command a packaged
//! document shows can be run where it is read (on crates.io and docs.rs, where only the
//! package's files are), or says that it is run from a clone of the repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Every `.rs` file under `src/`: its path from the root, and its text.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).expect("read src dir").map(|e| e.expect("dir entry").path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let shown = path.strip_prefix(root()).expect("under the root").display().to_string();
                out.push((shown, read(&path)));
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("src"), &mut out);
    out
}

/// The doc comments of a source (runs of `///` or `//!` lines), each as its first line's
/// number and its text without the comment markers.
fn doc_comments(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let body = trimmed.strip_prefix("///").or_else(|| trimmed.strip_prefix("//!"));
        match body {
            // `////` is an ordinary comment.
            Some(body) if !body.starts_with('/') => {
                let body = body.strip_prefix(' ').unwrap_or(body);
                if !open {
                    out.push((index + 1, String::new()));
                    open = true;
                }
                let (_, comment) = out.last_mut().expect("opened above");
                comment.push_str(body);
                comment.push('\n');
            }
            _ => open = false,
        }
    }
    out
}

/// A doc comment that names a document of record by its file (`docs/design.md`) sends a
/// reader on docs.rs to a file that is not there: the documents are published as
/// `redlease::guide::*`, to be linked (`[guide::design](crate::guide::design#tracing)`).
#[test]
fn no_doc_comment_names_a_document_of_record_by_its_file() {
    let mut found = Vec::new();
    for (path, text) in sources() {
        for (line, comment) in doc_comments(&text) {
            for (at, _) in comment.match_indices("docs/") {
                let rest = comment[at + "docs/".len()..].trim_start();
                let stem: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-').collect();
                if !stem.is_empty() && rest[stem.len()..].starts_with(".md") {
                    let lines_before = comment[..at].matches('\n').count();
                    found.push(format!("{path}:{}: docs/{stem}.md", line + lines_before));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "doc comments that name a document's file instead of linking crate::guide::NAME:\n{}",
        found.join("\n")
    );
}

/// A fenced code block of a Markdown text: its info string, its lines, the number of its
/// opening line, and the paragraph right before it (empty when a heading or another block
/// is right before it).
#[derive(Debug)]
struct Block {
    info: String,
    lines: Vec<String>,
    line: usize,
    before: String,
}

fn code_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    // A blank line ends a paragraph; the next text line starts another.
    let mut ended = false;
    let mut open: Option<Block> = None;
    for (index, line) in markdown.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (Some(_), Some(_)) => {
                blocks.extend(open.take());
                paragraph.clear();
            }
            (Some(block), None) => block.lines.push(line.to_owned()),
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    lines: Vec::new(),
                    line: index + 1,
                    before: paragraph.join("\n"),
                });
            }
            (None, None) if line.starts_with('#') => paragraph.clear(),
            (None, None) if line.trim().is_empty() => ended = true,
            (None, None) => {
                if ended {
                    paragraph.clear();
                    ended = false;
                }
                paragraph.push(line);
            }
        }
    }
    blocks
}

/// Whether rustdoc compiles a block with this info string as Rust (it does unless another
/// language is named).
fn is_rust(info: &str) -> bool {
    info.split(',').map(str::trim).all(|token| {
        token.is_empty()
            || token.starts_with("edition")
            || matches!(token, "rust" | "no_run" | "should_panic" | "compile_fail" | "ignore")
    })
}

/// Where `word` followed by `::` starts a path in `text` (not in the middle of another
/// path, as in `redlease::redis::cmd`).
fn paths_starting_with(text: &str, word: &str) -> usize {
    let needle = format!("{word}::");
    text.match_indices(&needle)
        .filter(|(at, _)| {
            let before = text[..*at].chars().next_back();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
        .count()
}

/// The library's own dependencies, as code names them (`rustc-hash` is `rustc_hash`): a
/// user of redlease has none of them unless the user adds it.
fn library_dependencies() -> Vec<String> {
    let manifest = read(&root().join("Cargo.toml"));
    let mut in_dependencies = false;
    let mut names = Vec::new();
    for line in manifest.lines() {
        if line.starts_with('[') {
            in_dependencies = line.trim() == "[dependencies]";
            continue;
        }
        if in_dependencies && let Some((name, _)) = line.split_once('=') {
            let name = name.trim();
            if !name.is_empty() && !name.starts_with('#') {
                names.push(name.replace('-', "_"));
            }
        }
    }
    assert!(names.iter().any(|n| n == "redis"), "no [dependencies] read from Cargo.toml: {names:?}");
    names
}

/// The examples of the documentation compile as doctests, which see every dependency of
/// the crate; a user's program sees only `redlease` (and what it re-exports). An example
/// that names one of the library's dependencies directly (`redis::cmd`) compiles here and
/// not for the user who copies it.
#[test]
fn doc_examples_name_no_dependency_a_user_does_not_have() {
    let dependencies = library_dependencies();
    let mut examples: Vec<(String, usize, String)> = Vec::new();
    for (path, text) in sources() {
        for (line, comment) in doc_comments(&text) {
            for block in code_blocks(&comment).into_iter().filter(|b| is_rust(&b.info)) {
                examples.push((path.clone(), line + block.line, block.lines.join("\n")));
            }
        }
    }
    let mut documents = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("read docs")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    documents.extend(docs);
    for document in documents {
        let shown = document.strip_prefix(root()).expect("under the root").display().to_string();
        for block in code_blocks(&read(&document)).into_iter().filter(|b| is_rust(&b.info)) {
            examples.push((shown.clone(), block.line, block.lines.join("\n")));
        }
    }
    assert!(examples.len() > 20, "too few examples found: {}", examples.len());
    let mut found = Vec::new();
    for (path, line, code) in &examples {
        for dependency in &dependencies {
            if paths_starting_with(code, dependency) > 0 {
                found
                    .push(format!("{path}:{line}: `{dependency}::` (write `redlease::{dependency}::` if re-exported)"));
            }
        }
    }
    assert!(found.is_empty(), "examples that name a dependency of the library:\n{}", found.join("\n"));
}

/// The names `lib.rs` exports: the last name of every `pub use` (or its `as` name).
fn exports_of_lib_rs() -> BTreeSet<String> {
    let text = read(&root().join("src/lib.rs"));
    let mut names = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("\npub use ") {
        let after = &rest[at + "\npub use ".len()..];
        let end = after.find(';').expect("a pub use ends with ;");
        let item = &after[..end];
        let listed = match (item.find('{'), item.rfind('}')) {
            (Some(open), Some(close)) => item[open + 1..close].split(',').map(str::to_owned).collect(),
            _ => vec![item.to_owned()],
        };
        for one in listed {
            let one = one.trim();
            if one.is_empty() {
                continue;
            }
            let name = match one.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => one.rsplit("::").next().unwrap_or(one).trim(),
            };
            names.insert(name.to_owned());
        }
        rest = &after[end..];
    }
    names
}

/// The names `docs/design.md` says `lib.rs` exports: the backquoted names of the table
/// after the line that says so, in its second column.
fn exports_in_the_design() -> BTreeSet<String> {
    let design = read(&root().join("docs/design.md"));
    let lines: Vec<&str> = design.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.contains("`lib.rs` re-exports"))
        .expect("docs/design.md has a line that says what `lib.rs` re-exports");
    let mut names = BTreeSet::new();
    let mut rows = lines[start + 1..].iter().skip_while(|l| !l.starts_with('|'));
    for row in rows.by_ref().take_while(|l| l.starts_with('|')) {
        let Some(column) = row.split('|').nth(2) else { continue };
        for (index, part) in column.split('`').enumerate() {
            if index % 2 == 1 {
                names.insert(part.trim().to_owned());
            }
        }
    }
    names
}

/// The list of exports in the design is the façade a reader trusts to be whole: every
/// name `lib.rs` exports is in it, and nothing else.
#[test]
fn the_design_lists_every_export_of_lib_rs_and_no_other() {
    let exported = exports_of_lib_rs();
    let listed = exports_in_the_design();
    assert!(exported.len() > 50, "too few exports read from lib.rs: {exported:?}");
    let missing: Vec<&String> = exported.difference(&listed).collect();
    let extra: Vec<&String> = listed.difference(&exported).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/design.md's list of exports differs from lib.rs: not listed {missing:?}; listed but not exported {extra:?}"
    );
}

/// The words that mark a shell block as one to run from a clone of the repository; they
/// stand in the paragraph right before it.
const REPOSITORY_ONLY: &str = "from a clone of the repository";

/// The files a package of the workspace ships, as `cargo package --list` gives them.
fn packaged_files(package: &str) -> Vec<String> {
    let out = Command::new(env!("CARGO"))
        .args(["package", "--list", "--allow-dirty", "--offline", "-p", package, "--manifest-path"])
        .arg(root().join("Cargo.toml"))
        .output()
        .expect("run cargo package --list");
    assert!(out.status.success(), "cargo package --list -p {package}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// The commands of a shell block, one per line (continuations joined), without comments,
/// each as its words after any `VAR=value` assignments.
fn commands(block: &Block) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in &block.lines {
        let code = match line.find(" #") {
            Some(at) => &line[..at],
            None if line.trim_start().starts_with('#') => "",
            None => line,
        };
        if let Some(continued) = code.trim_end().strip_suffix('\\') {
            pending.push_str(continued);
            pending.push(' ');
            continue;
        }
        pending.push_str(code);
        let words: Vec<String> = pending
            .split_whitespace()
            .skip_while(|w| w.split_once('=').is_some_and(|(name, _)| !name.is_empty() && !name.contains('-')))
            .map(str::to_owned)
            .collect();
        pending.clear();
        if !words.is_empty() {
            out.push(words);
        }
    }
    out
}

/// Why a command cannot be run from the package's files alone, if it cannot.
fn needs_a_clone(words: &[String], packaged: &[String]) -> Option<&'static str> {
    let program = words[0].as_str();
    if program == "cargo" {
        return match words.get(1).map(String::as_str) {
            Some("add") => None,
            Some("install") if words.iter().any(|w| w == "--path") => Some("installs from a path"),
            Some("install") => None,
            _ => Some("runs cargo in the workspace"),
        };
    }
    if program.contains('/') && !packaged.iter().any(|f| f == program.trim_start_matches("./")) {
        return Some("runs a file the package does not ship");
    }
    None
}

/// On crates.io and docs.rs a reader has the package's files only: a shell command a
/// packaged document shows runs there (`cargo add redlease`, `cargo install --locked
/// redlease-cli`, the installed `redlease`), or the paragraph before its block says that it
/// is run from a clone of the repository. `cargo install` is always `--locked`, so that
/// an install builds with the versions the package was tested with. The README's quick
/// start is the two commands of a fresh clone: the demo and the tests.
#[test]
fn every_command_a_packaged_document_shows_runs_where_it_is_read() {
    let mut problems = Vec::new();
    let mut documents = 0;
    for (package, dir) in [("redlease", root().to_path_buf()), ("redlease-cli", root().join("cli"))] {
        let packaged = packaged_files(package);
        for file in packaged.iter().filter(|f| f.ends_with(".md")) {
            documents += 1;
            let shown = format!("{package}'s {file}");
            for block in code_blocks(&read(&dir.join(file))) {
                if !matches!(block.info.as_str(), "sh" | "bash" | "console" | "shell") {
                    continue;
                }
                let marked = block.before.to_lowercase().contains(REPOSITORY_ONLY);
                for words in commands(&block) {
                    let line = words.join(" ");
                    if words[0] == "cargo"
                        && words.get(1).is_some_and(|w| w == "install")
                        && !words.contains(&"--locked".to_owned())
                    {
                        problems.push(format!("{shown}:{}: `{line}` installs without --locked", block.line));
                    }
                    if let Some(why) = needs_a_clone(&words, &packaged)
                        && !marked
                    {
                        problems.push(format!(
                            "{shown}:{}: `{line}` {why}, and the paragraph before its block does not say \"{REPOSITORY_ONLY}\"",
                            block.line
                        ));
                    }
                }
            }
        }
    }
    assert!(documents >= 8, "too few packaged documents read: {documents}");
    assert!(problems.is_empty(), "commands a reader of the package cannot run as shown:\n{}", problems.join("\n"));

    let readme = read(&root().join("README.md"));
    let quick_start = &readme[readme.find("## Quick start").expect("the README has a quick start")..];
    let block = code_blocks(quick_start).into_iter().next().expect("the quick start shows its commands");
    let shown: Vec<String> = commands(&block).into_iter().map(|w| w.join(" ")).collect();
    assert_eq!(shown, ["scripts/demo", "scripts/test"], "the quick start of a fresh clone is the demo and the tests");
    assert!(block.before.to_lowercase().contains(REPOSITORY_ONLY), "{block:?}");
}
