//! The house in layers, checked: every module of `src/` belongs to one floor of the table
//! "Layers" in `docs/design.md` (the floor of its top-level folder; `lib.rs` and `guide.rs`,
//! the only files at the root, are the front door's), imports only from its own floor or the
//! floors below, and no modules import each other in a loop. The table is read from the
//! document itself, so the design of record and the code cannot drift apart.
//!
//! Imports are read the way the compiler names them: every `crate::a::b` path (grouped
//! `use crate::{x, y::z}` included) and every `super::` path, outside comments. A path into
//! the crate root (`crate::Lock`, a re-export) is refused outside `lib.rs`: it would hide
//! which module is really used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`engine::lease`, `""` for the root) → source text.
type Sources = BTreeMap<String, String>;

/// Module → (module it names → the names that tie them).
type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

fn read_sources(src: &Path) -> Sources {
    fn walk(dir: &Path, src: &Path, out: &mut Sources) {
        for entry in std::fs::read_dir(dir).expect("read src dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                walk(&path, src, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).expect("under src").with_extension("");
                let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    parts.pop();
                }
                out.insert(parts.join("::"), std::fs::read_to_string(&path).expect("read source"));
            }
        }
    }
    let mut out = Sources::new();
    walk(src, src, &mut out);
    out
}

/// The text without comments (line, doc and block comments), so that doc links do not count.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(next) = chars.next() {
                    out.push(next);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Expands a `use` group body (`a, b::{c, d}, e as f`) into paths, each prefixed.
fn expand_group(prefix: &[String], body: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let (mut depth, mut item) = (0, String::new());
    for c in body.chars().chain(std::iter::once(',')) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if c == ',' && depth == 0 {
            let it = item.trim().to_owned();
            item.clear();
            if it.is_empty() {
                continue;
            }
            if let Some(open) = it.find("::{") {
                let mut p = prefix.to_vec();
                p.extend(it[..open].split("::").filter(|s| !s.is_empty()).map(str::to_owned));
                out.extend(expand_group(&p, &it[open + 3..it.len() - 1]));
            } else {
                let head = it.split(" as ").next().unwrap_or("").trim();
                let mut p = prefix.to_vec();
                p.extend(head.split("::").filter(|s| !s.is_empty() && *s != "self").map(str::to_owned));
                out.push(p);
            }
            continue;
        }
        item.push(c);
    }
    out
}

/// Every path `module` names into the crate: `crate::...` and `super::...`, absolute.
fn referenced_paths(module: &str, text: &str) -> Vec<Vec<String>> {
    // Unit tests (`#[cfg(test)] mod tests`, at the end of a file) are not part of the house.
    let text = strip_comments(text.split("#[cfg(test)]").next().unwrap_or(text));
    let here: Vec<String> = if module.is_empty() { vec![] } else { module.split("::").map(str::to_owned).collect() };
    let mut paths = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let starts_word = i == 0 || !is_ident(bytes[i - 1]);
        // `$crate::` in a macro names the root as the macro's user sees it: not an import.
        let after_dollar = i > 0 && bytes[i - 1] == b'$';
        if starts_word && !after_dollar && rest.starts_with("crate::") {
            i = crate_path_at(&text, i, &mut paths);
            continue;
        }
        if starts_word && rest.starts_with("super::") {
            i = super_path_at(&text, i, &here, &mut paths);
            continue;
        }
        i += rest.chars().next().map_or(1, char::len_utf8);
    }
    paths
}

/// Whether `b` can be part of an identifier.
fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Pushes onto `paths` the path that the `crate::` at `i` in `text` starts (several for a
/// group); returns where the scan goes on.
fn crate_path_at(text: &str, i: usize, paths: &mut Vec<Vec<String>>) -> usize {
    let bytes = text.as_bytes();
    let mut j = i + "crate::".len();
    let mut segs: Vec<String> = Vec::new();
    loop {
        let start = j;
        while j < text.len() && is_ident(bytes[j]) {
            j += 1;
        }
        if j > start {
            segs.push(text[start..j].to_owned());
        }
        // A group: `crate::{...}` right away, or `crate::a::{...}`.
        let group = if text[j..].starts_with("::{") {
            Some(j + 3)
        } else if segs.is_empty() && text[j..].starts_with('{') {
            Some(j + 1)
        } else {
            None
        };
        if let Some(open) = group {
            let (mut depth, mut k) = (1, open);
            while k < text.len() && depth > 0 {
                match bytes[k] {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    _ => {}
                }
                k += 1;
            }
            paths.extend(expand_group(&segs, &text[open..k - 1]));
            segs.clear();
            j = k;
            break;
        }
        if text[j..].starts_with("::") && j + 2 < text.len() && is_ident(bytes[j + 2]) {
            j += 2;
            continue;
        }
        break;
    }
    if !segs.is_empty() {
        paths.push(segs);
    }
    j.max(i + 1)
}

/// Pushes onto `paths` the path that the `super::` at `i` in `text` names, made absolute
/// from the module `here`; returns where the scan goes on.
fn super_path_at(text: &str, i: usize, here: &[String], paths: &mut Vec<Vec<String>>) -> usize {
    let bytes = text.as_bytes();
    // (`super::*` and the like name the parent as a whole: an edge to it.)
    let mut j = i;
    let mut up = 0;
    while text[j..].starts_with("super::") {
        up += 1;
        j += "super::".len();
    }
    let start = j;
    while j < text.len() && (is_ident(bytes[j]) || text[j..].starts_with("::")) {
        j += if text[j..].starts_with("::") { 2 } else { 1 };
    }
    let mut base: Vec<String> = here[..here.len().saturating_sub(up)].to_vec();
    base.extend(text[start..j].split("::").filter(|s| !s.is_empty()).map(str::to_owned));
    if !base.is_empty() {
        paths.push(base);
    }
    j.max(i + 1)
}

/// The longest known module that `path` starts with, and the name after it.
fn resolve<'a>(modules: &'a Sources, path: &[String]) -> Option<(&'a str, String)> {
    (1..=path.len()).rev().find_map(|n| {
        let candidate = path[..n].join("::");
        modules
            .get_key_value(&candidate)
            .map(|(m, _)| (m.as_str(), path.get(n).cloned().unwrap_or_else(|| "*".to_owned())))
    })
}

/// The import edges between modules, and the paths that name the crate root.
fn edges(modules: &Sources) -> (Edges, Vec<String>) {
    let mut edges = Edges::new();
    let mut into_root = Vec::new();
    for (module, text) in modules {
        let entry = edges.entry(module.clone()).or_default();
        for path in referenced_paths(module, text) {
            match resolve(modules, &path) {
                Some((target, name)) if target != module => {
                    entry.entry(target.to_owned()).or_default().insert(name);
                }
                Some(_) => {}
                None if !module.is_empty() => into_root.push(format!("{module} names crate::{}", path.join("::"))),
                None => {}
            }
        }
    }
    (edges, into_root)
}

/// One loop among the modules, if there is one, as the modules along it.
fn find_loop(edges: &Edges) -> Option<Vec<String>> {
    fn visit(m: &str, edges: &Edges, state: &mut BTreeMap<String, u8>, stack: &mut Vec<String>) -> Option<Vec<String>> {
        state.insert(m.to_owned(), 1);
        stack.push(m.to_owned());
        for next in edges.get(m).into_iter().flat_map(|e| e.keys()) {
            match state.get(next.as_str()) {
                Some(1) => {
                    let from = stack.iter().position(|s| s == next).unwrap_or(0);
                    let mut cycle = stack[from..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(cycle) = visit(next, edges, state, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(m.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in edges.keys() {
        if !state.contains_key(m.as_str())
            && let Some(cycle) = visit(m, edges, &mut state, &mut Vec::new())
        {
            return Some(cycle);
        }
    }
    None
}

/// The floors of the "Layers" table of `docs/design.md`, top first: for each, what its
/// second column names in backticks, as written there: folders of `src/` with their slash
/// (`api/`), files at its root with their extension (`lib.rs`).
fn floors(design: &str) -> Vec<(String, Vec<String>)> {
    let section = design.split("\n## Layers").nth(1).expect("docs/design.md has a \"## Layers\" section");
    section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2) // header and separator
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let name = cells.get(1).copied().unwrap_or("").trim_matches('*').to_owned();
            let homes = cells.get(2).copied().unwrap_or("").split('`').skip(1).step_by(2).map(str::to_owned).collect();
            (name, homes)
        })
        .collect()
}

/// Where `module` lives, as the Layers table names it: its top-level folder (`api/` for
/// `api::lock`), or its file at the root of `src/` (`lib.rs` for the root, `guide.rs`). A
/// top-level module with modules under it is a folder; one without is a file.
fn home_of(module: &str, modules: &Sources) -> String {
    if module.is_empty() {
        return "lib.rs".to_owned();
    }
    let top = module.split("::").next().unwrap_or(module);
    let prefix = format!("{top}::");
    if module.contains("::") || modules.keys().any(|m| m.starts_with(&prefix)) {
        format!("{top}/")
    } else {
        format!("{top}.rs")
    }
}

/// Every way `modules` break the floors: a module on no floor (a folder or a root file the
/// table does not name), an import from a higher floor, a path into the crate root, a loop.
fn violations(modules: &Sources, floors: &[(String, Vec<String>)]) -> Vec<String> {
    let floor_of = |module: &str| -> Option<usize> {
        let home = home_of(module, modules);
        floors.iter().position(|(_, homes)| homes.contains(&home))
    };
    let mut found = Vec::new();
    for module in modules.keys() {
        if floor_of(module).is_none() {
            let home = home_of(module, modules);
            found.push(format!("module `{module}` (in src/{home}) is on no floor of the Layers table"));
        }
    }
    let (edges, into_root) = edges(modules);
    found.extend(into_root);
    for (from, targets) in &edges {
        for (to, names) in targets {
            if let (Some(a), Some(b)) = (floor_of(from), floor_of(to))
                && b < a
            {
                found.push(format!(
                    "`{from}` ({}) imports `{to}` ({}), a floor above it: {names:?}",
                    floors[a].0, floors[b].0
                ));
            }
        }
    }
    if let Some(cycle) = find_loop(&edges) {
        found.push(format!("import loop: {}", cycle.join(" -> ")));
    }
    found
}

#[test]
fn every_module_imports_only_from_its_floor_or_below_and_nothing_loops() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = std::fs::read_to_string(root.join("docs/design.md")).expect("docs/design.md");
    let floors = floors(&design);
    assert!(floors.len() >= 4, "the Layers table has its floors: {floors:?}");
    let modules = read_sources(&root.join("src"));
    assert!(modules.len() > 20, "all of src/ was read: {:?}", modules.keys());
    let found = violations(&modules, &floors);
    assert!(found.is_empty(), "the layers of docs/design.md do not hold:\n{}", found.join("\n"));
}

/// The tests that check "nothing was sent" leave `SET` out of what they count, as the
/// clients' announcements (`testkit::server::commands_served`): that holds only while the
/// library sends `SET` of its own for nothing else (the scripts' `SET`s come with the
/// script's call, which is counted).
#[test]
fn the_library_sends_set_only_to_announce_a_client() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let modules = read_sources(&root.join("src"));
    let senders: Vec<&String> = modules
        .iter()
        .filter(|(_, text)| {
            let code = strip_comments(text);
            // A command of its own (`cmd`, a pipeline's `cmd`), or the `Commands` trait's
            // helpers. A script's `SET`s need no check: the script's call is what counts.
            ["cmd(\"SET\")", "cmd(\"set\")", "redis::Commands", "TypedCommands"].iter().any(|name| code.contains(name))
        })
        .map(|(module, _)| module)
        .collect();
    assert_eq!(senders, ["kind::presence"], "modules that send SET");
}

#[test]
fn the_checker_finds_a_loop_an_upward_import_a_root_path_and_a_homeless_module() {
    let floors = vec![
        ("top".to_owned(), vec!["lib.rs".to_owned(), "guide.rs".to_owned(), "front/".to_owned()]),
        ("bottom".to_owned(), vec!["base/".to_owned(), "other/".to_owned()]),
    ];
    let sources =
        |files: &[(&str, &str)]| -> Sources { files.iter().map(|(m, t)| ((*m).to_owned(), (*t).to_owned())).collect() };
    // The house as it should be: two floors of folders, `lib.rs` and `guide.rs` at the root.
    let house = [
        ("", "mod front; pub mod guide; mod base; mod other;"),
        ("guide", ""),
        ("front", "pub(crate) mod door;"),
        ("front::door", "use crate::base::thing::{Thing, other_fn};\n// crate::front::nothing in a comment"),
        ("base", "pub(crate) mod thing;"),
        ("base::thing", "pub fn f() {}"),
        ("base::thing::deep", "fn g() { super::super::deeper::h() }"),
        ("base::deeper", "pub fn h() {}"),
        ("other", "pub(crate) mod x;"),
        ("other::x", ""),
    ];
    let with = |changes: &[(&str, &str)]| {
        let mut all = sources(&house);
        all.extend(sources(changes));
        all
    };
    assert_eq!(violations(&sources(&house), &floors), Vec::<String>::new());
    // Upward: a module deep in a folder of the bottom floor names one of the top floor's.
    let upward = with(&[("base::thing", "use crate::front::door::Up;")]);
    assert!(
        violations(&upward, &floors).iter().any(|v| v.contains("`base::thing` (bottom) imports `front::door` (top)"))
    );
    // A loop across two folders of one floor, one way by `crate::`, back by `super::`.
    let looped = with(&[
        ("base::thing", "use crate::{other::x::A};"),
        ("other::x", "fn g() { super::super::base::thing::f() }"),
    ]);
    assert!(
        violations(&looped, &floors).iter().any(|v| v.contains("import loop: ")),
        "{:?}",
        violations(&looped, &floors)
    );
    let rooted = with(&[("front::door", "use crate::Lock;")]);
    assert!(violations(&rooted, &floors).iter().any(|v| v.contains("names crate::Lock")));
    // Homeless: a file at the root other than lib.rs and guide.rs, a folder the table does
    // not name, and a folder of the table flattened into a root file.
    let stray = with(&[("stray", "")]);
    assert!(violations(&stray, &floors).iter().any(|v| v.contains("`stray` (in src/stray.rs) is on no floor")));
    let attic = with(&[("attic", "mod chest;"), ("attic::chest", "")]);
    assert!(violations(&attic, &floors).iter().any(|v| v.contains("`attic::chest` (in src/attic/) is on no floor")));
    let mut flattened = sources(&house);
    flattened.retain(|m, _| !m.starts_with("other::"));
    assert!(violations(&flattened, &floors).iter().any(|v| v.contains("`other` (in src/other.rs) is on no floor")));
}

/// Every example that talks to Redis runs as it is on a machine with nothing on 6379: it
/// takes its URL from the shared `examples/support/redis_url.rs` (REDIS_URL, else a Redis
/// on 127.0.0.1:6379 if one answers, else a throwaway `redis-server` it starts and stops),
/// and what it prints is for a human to read, not a `Debug` dump (`{:?}`).
///
/// Breaks if an example falls back to a fixed `redis://127.0.0.1:6379/` of its own (before
/// the fix: `stats` and `fenced_store` failed with "connection refused" there) or prints
/// with `{:?}`.
#[test]
fn every_example_finds_or_starts_its_redis_and_prints_for_people() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("read examples") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let name = path.file_stem().expect("a name").to_string_lossy().into_owned();
        let code = strip_comments(&std::fs::read_to_string(&path).expect("read example"));
        assert!(!code.contains(":?}") && !code.contains("{:?"), "{name} prints a Debug dump");
        if code.contains("Client::") {
            assert!(code.contains("mod redis_url;"), "{name} does not use examples/support/redis_url.rs");
            assert!(!code.contains("127.0.0.1:6379"), "{name} has a fixed Redis address of its own");
        }
        checked.push(name);
    }
    checked.sort();
    assert_eq!(checked, ["fenced_store", "prometheus", "quickstart", "stats"], "the examples checked");
}

/// Where `text` names a variant of the crate's `Kind` (`Kind::Spin`, not `ErrorKind::…`):
/// the byte offset of each `Kind::`.
fn kind_variants(text: &str) -> Vec<usize> {
    text.match_indices("Kind::")
        .map(|(at, _)| at)
        .filter(|&at| {
            let before = text[..at].chars().next_back();
            let after = text[at + 6..].chars().next();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_') && after.is_some_and(|c| c.is_ascii_uppercase())
        })
        .collect()
}

/// Every decision on a lock kind made outside its spec: a `matches!` or a comparison
/// with a variant anywhere, a match arm on a variant outside the module `kind` (whose
/// `Kind::spec` is the one match), a wildcard arm inside it.
fn kind_decisions(modules: &Sources) -> Vec<String> {
    let mut found = Vec::new();
    for (module, text) in modules {
        let text = strip_comments(text);
        for at in kind_variants(&text) {
            let line = text[..at].matches('\n').count() + 1;
            let before = text[..at].trim_end();
            let after =
                text[at..].split_once(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).map_or("", |x| x.1);
            let after = after.trim_start();
            let statement = &text[text[..at].rfind(';').map_or(0, |i| i + 1)..at];
            if before.ends_with("==") || before.ends_with("!=") {
                found.push(format!("{module}:{line}: a kind compared with a variant"));
            } else if statement.contains("matches!(") {
                found.push(format!("{module}:{line}: a kind tested with matches!"));
            } else if module != "kind" && (after.starts_with("=>") || after.starts_with('|')) {
                found.push(format!("{module}:{line}: a match on a kind outside Kind::spec"));
            }
        }
        if module == "kind" && text.contains("_ =>") {
            found.push(format!("{module}: a wildcard arm in the module of Kind::spec"));
        }
    }
    found
}

/// A lock kind is decided in one place: its `Spec`, declared in its own module, which the
/// one match on `Kind` (`Kind::spec`, exhaustive) returns. Every other decision reads the
/// spec, so a new variant cannot compile until its spec is written, and no case of it is
/// left to a default somebody else chose.
///
/// Breaks if code tests a kind with `matches!`, `==` or `!=` against a variant, matches on
/// its variants outside `Kind::spec`, or gives that match a wildcard arm.
#[test]
fn every_decision_on_a_kind_is_its_spec() {
    let modules = read_sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(modules.get("kind").is_some_and(|text| text.contains("fn spec(self)")), "Kind::spec is in kind/mod.rs");
    let found = kind_decisions(&modules);
    assert!(found.is_empty(), "decisions on a kind outside its spec:\n{}", found.join("\n"));
}

#[test]
fn the_kind_checker_finds_each_way_around_the_spec() {
    let cases = [
        ("handle", "let b = (kind == Kind::Spin).then_some(1);", "compared"),
        ("handle", "let b = kind != Kind::Read;", "compared"),
        ("engine::acquire", "let q = matches!(kind, Kind::Fair | Kind::NonReentrantFair);", "matches!"),
        ("engine::acquire", "match kind { Kind::Read => 1, Kind::Write | Kind::Spin => 2, other => 3 }", "outside"),
        ("kind", "match self { Kind::Reentrant => &A, _ => &B }", "wildcard"),
    ];
    for (module, text, says) in cases {
        let modules = Sources::from([(module.to_owned(), text.to_owned())]);
        let found = kind_decisions(&modules);
        assert!(found.iter().any(|f| f.contains(says)), "{text:?}: {found:?}");
    }
    let fine = Sources::from([
        ("client".to_owned(), "Handle::new(engine, name, Kind::Reentrant); let e = ErrorKind::Io == k;".to_owned()),
        ("kind".to_owned(), "match self { Kind::Reentrant => &A, Kind::Fair => &B }".to_owned()),
    ]);
    assert_eq!(kind_decisions(&fine), Vec::<String>::new());
}

/// The most lines a source file of the workspace may have, and a function.
const MOST_LINES_IN_A_FILE: usize = 700;
const MOST_LINES_IN_A_FUNCTION: usize = 80;

/// The functions of `text` longer than `most` lines, as (line, name, length): a function
/// runs from its `fn` line to the first line after it that is its indentation and `}`, as
/// rustfmt writes them (a declaration without a body has none).
fn long_functions(text: &str, most: usize) -> Vec<(usize, String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let after_qualifiers = ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "]
            .iter()
            .fold(code, |rest, q| rest.strip_prefix(q).unwrap_or(rest));
        let Some(signature) = after_qualifiers.strip_prefix("fn ") else { continue };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let name: String = signature.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let closing = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == closing) {
            let length = end + 2;
            if length > most {
                found.push((i + 1, name, length));
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every source file of the workspace (the library, the command line, the benchmark, the
/// test kit, the tests, the examples) is one concern you can hold in your head: at most
/// 700 lines, and no function over 80.
///
/// Breaks when a file or a function grows past its bound.
#[test]
fn every_source_file_and_function_is_short_enough_to_read() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "cli", "benches", "testkit", "tests", "examples"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "the walk found the workspace's sources ({} files)", files.len());
    let mut found = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("read source");
        let shown = path.strip_prefix(root).unwrap_or(&path).display().to_string();
        let lines = text.lines().count();
        if lines > MOST_LINES_IN_A_FILE {
            found.push(format!("{shown}: {lines} lines"));
        }
        for (line, name, length) in long_functions(&text, MOST_LINES_IN_A_FUNCTION) {
            found.push(format!("{shown}:{line}: fn {name} is {length} lines"));
        }
    }
    assert!(
        found.is_empty(),
        "over {MOST_LINES_IN_A_FILE} lines a file or {MOST_LINES_IN_A_FUNCTION} a function:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_length_checker_measures_functions_as_rustfmt_writes_them() {
    let body = |n: usize| "        x += 1;\n".repeat(n);
    let text = format!(
        "fn short() {{\n{}}}\n\nimpl A {{\n    pub(crate) fn long(&self) {{\n{}    }}\n\n    fn declared(&self);\n}}\n",
        body(3),
        body(79)
    );
    assert_eq!(long_functions(&text, 80), vec![(8, "long".to_owned(), 81)]);
    assert_eq!(long_functions(&text, 81), Vec::new());
}
