//! The documents checked against what they describe, by reading both as text: the rustdoc
//! of `src/` links the documents of record (`redlease::guide`) instead of naming their
//! files.

use std::path::{Path, PathBuf};

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
