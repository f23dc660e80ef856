//! Reading scripts out of Java sources: the string literals a method's body concatenates,
//! unescaped. Enough Java for Redisson's sources (comments, string, char and text-block
//! literals, nested braces), not a parser of the language.

/// A token of Java source, as far as finding methods and their literals needs.
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Text(String),
    Punct(char),
}

/// The scripts in the bodies of every method named `method` in `source`: each run of string
/// literals joined by `+` alone, unescaped, that calls Redis (`redis.call`), in order.
pub(crate) fn scripts_in_method(source: &str, method: &str) -> Result<Vec<String>, String> {
    let tokens = tokenize(source)?;
    let mut scripts = Vec::new();
    let mut at = 0;
    while let Some(body) = next_declaration(&tokens, method, &mut at) {
        scripts.extend(literal_runs(body).into_iter().filter(|s| s.contains("redis.call")));
    }
    Ok(scripts)
}

/// The body of the next declaration of `method` at or after `*at` (its name, a parameter
/// list, perhaps `throws …`, then `{`), and moves `*at` past it.
fn next_declaration<'a>(tokens: &'a [Token], method: &str, at: &mut usize) -> Option<&'a [Token]> {
    while *at < tokens.len() {
        let start = *at;
        *at += 1;
        if tokens[start] != Token::Word(method.to_string()) || tokens.get(start + 1) != Some(&Token::Punct('(')) {
            continue;
        }
        // A call is preceded by `.`, `(`, `=`, `,`, `return`…; a declaration by its type.
        let typed = match start.checked_sub(1).map(|i| &tokens[i]) {
            Some(Token::Word(word)) => word != "return" && word != "new",
            Some(Token::Punct('>')) | Some(Token::Punct(']')) => true,
            _ => false,
        };
        if !typed {
            continue;
        }
        let mut i = matching(tokens, start + 1, '(', ')')? + 1;
        if tokens.get(i) == Some(&Token::Word("throws".into())) {
            while i < tokens.len() && tokens[i] != Token::Punct('{') && tokens[i] != Token::Punct(';') {
                i += 1;
            }
        }
        if tokens.get(i) != Some(&Token::Punct('{')) {
            continue;
        }
        let end = matching(tokens, i, '{', '}')?;
        *at = end + 1;
        return Some(&tokens[i + 1..end]);
    }
    None
}

/// The index of the token that closes the one opened at `open`.
fn matching(tokens: &[Token], open: usize, opens: char, closes: char) -> Option<usize> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        if *token == Token::Punct(opens) {
            depth += 1;
        } else if *token == Token::Punct(closes) {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
    }
    None
}

/// Each run of literals joined by `+` and nothing else (a run that goes on with a variable
/// is not a script written out, and is left out).
fn literal_runs(body: &[Token]) -> Vec<String> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < body.len() {
        let Token::Text(first) = &body[i] else {
            i += 1;
            continue;
        };
        let mut run = first.clone();
        let mut pure = i == 0 || body[i - 1] != Token::Punct('+');
        i += 1;
        while body.get(i) == Some(&Token::Punct('+')) {
            match body.get(i + 1) {
                Some(Token::Text(more)) => {
                    run.push_str(more);
                    i += 2;
                }
                _ => {
                    pure = false;
                    break;
                }
            }
        }
        if pure {
            runs.push(run);
        }
    }
    runs
}

fn tokenize(source: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = source.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                i += 1;
            }
            i += 2;
        } else if c == '"' && next == Some('"') && chars.get(i + 2) == Some(&'"') {
            let (text, end) = text_block(&chars, i + 3)?;
            tokens.push(Token::Text(text));
            i = end;
        } else if c == '"' || c == '\'' {
            let (text, end) = quoted(&chars, i + 1, c)?;
            // A char literal is kept as punctuation: it is never part of a script.
            tokens.push(if c == '"' { Token::Text(text) } else { Token::Punct('\'') });
            i = end;
        } else if c.is_alphanumeric() || c == '_' || c == '$' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '$') {
                i += 1;
            }
            tokens.push(Token::Word(chars[start..i].iter().collect()));
        } else {
            tokens.push(Token::Punct(c));
            i += 1;
        }
    }
    Ok(tokens)
}

/// A `"…"` or `'…'` literal from just after its opening quote: its text, and the index past
/// its closing quote.
fn quoted(chars: &[char], mut i: usize, quote: char) -> Result<(String, usize), String> {
    let mut text = String::new();
    while i < chars.len() {
        match chars[i] {
            c if c == quote => return Ok((text, i + 1)),
            '\\' => {
                let (c, next) = escape(chars, i + 1)?;
                text.push(c);
                i = next;
            }
            '\n' => return Err("a string literal runs past its line".into()),
            c => {
                text.push(c);
                i += 1;
            }
        }
    }
    Err("a literal is not closed".into())
}

/// A text block from just after its opening `"""`: its lines without their common
/// indentation, escapes read, and the index past its closing `"""`.
fn text_block(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let mut i = start;
    while i + 2 < chars.len()
        && !(chars[i] == '"' && chars[i + 1] == '"' && chars[i + 2] == '"' && chars[i - 1] != '\\')
    {
        i += 1;
    }
    if i + 2 >= chars.len() {
        return Err("a text block is not closed".into());
    }
    let raw: String = chars[start..i].iter().collect();
    let mut lines: Vec<&str> = raw.split('\n').skip(1).collect();
    let closing_alone = lines.last().is_some_and(|l| l.trim().is_empty());
    let indent = lines
        .iter()
        .enumerate()
        .filter(|(n, l)| !l.trim().is_empty() || (closing_alone && *n + 1 == lines.len()))
        .map(|(_, l)| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    if closing_alone {
        lines.pop();
    }
    let body: Vec<String> = lines.iter().map(|l| l.get(indent..).unwrap_or("").trim_end().to_string()).collect();
    let mut joined = body.join("\n");
    if closing_alone {
        joined.push('\n');
    }
    let chars_of: Vec<char> = joined.chars().collect();
    let mut text = String::new();
    let mut j = 0;
    while j < chars_of.len() {
        if chars_of[j] == '\\' {
            if chars_of.get(j + 1) == Some(&'\n') {
                j += 2;
                continue;
            }
            let (c, next) = escape(&chars_of, j + 1)?;
            text.push(c);
            j = next;
        } else {
            text.push(chars_of[j]);
            j += 1;
        }
    }
    Ok((text, i + 3))
}

/// The character an escape stands for, from just after its `\`, and the index past it.
fn escape(chars: &[char], i: usize) -> Result<(char, usize), String> {
    let c = *chars.get(i).ok_or("an escape at the end")?;
    let simple = match c {
        'b' => Some('\u{8}'),
        't' => Some('\t'),
        'n' => Some('\n'),
        'f' => Some('\u{c}'),
        'r' => Some('\r'),
        's' => Some(' '),
        '"' | '\'' | '\\' => Some(c),
        _ => None,
    };
    if let Some(simple) = simple {
        return Ok((simple, i + 1));
    }
    if c == 'u' {
        let mut j = i;
        while chars.get(j) == Some(&'u') {
            j += 1;
        }
        let hex: String = chars.get(j..j + 4).ok_or("a short \\u escape")?.iter().collect();
        let code = u32::from_str_radix(&hex, 16).map_err(|e| format!("\\u{hex}: {e}"))?;
        return Ok((char::from_u32(code).ok_or(format!("\\u{hex}: not a character"))?, j + 4));
    }
    if let Some(first) = c.to_digit(8) {
        // Octal: up to three digits, at most \377.
        let (mut value, mut j) = (first, i + 1);
        let most = if first <= 3 { 3 } else { 2 };
        while j < i + most {
            match chars.get(j).and_then(|d| d.to_digit(8)) {
                Some(d) => {
                    value = value * 8 + d;
                    j += 1;
                }
                None => break,
            }
        }
        return Ok((char::from_u32(value).ok_or("an octal escape")?, j));
    }
    Err(format!("unknown escape \\{c}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An invented Java class, written here to hold the extractor to the shapes Java source
    /// takes (comments, char literals, joined literals, text blocks); its scripts are toys.
    const SOURCE: &str = r#"
        public class Example {
            // a comment with "quotes" and tryIt( {
            /* and tryIt() { "in a block" } */
            <T> RFuture<T> tryIt(long lease, String s) throws IOException {
                char q = '"';
                if (lease > 0) { log("not a script"); }
                return eval("local a = redis.call('get', KEYS[1]); " +
                            "return \"a\\b\" .. '\u0041' .. \101;",
                        Collections.singletonList(name), lease);
            }
            void other() {
                tryIt(1, "redis.call('del', KEYS[1])" + suffix);
                String block = """
                    redis.call('set', KEYS[1], 1)
                      return 1\
                    """;
            }
            Object tryIt(int n) { return "redis.call('incr', KEYS[1])"; }
        }
    "#;

    #[test]
    fn scripts_are_the_literals_a_declaration_joins() {
        let scripts = scripts_in_method(SOURCE, "tryIt").unwrap();
        assert_eq!(
            scripts,
            ["local a = redis.call('get', KEYS[1]); return \"a\\b\" .. 'A' .. A;", "redis.call('incr', KEYS[1])",],
            "the call in other() and the run that goes on with a variable are not scripts"
        );
    }

    #[test]
    fn a_text_block_loses_its_indentation_and_joins_escaped_lines() {
        let scripts = scripts_in_method(&SOURCE.replace("void other()", "void block()"), "block").unwrap();
        assert_eq!(scripts, ["redis.call('set', KEYS[1], 1)\n  return 1"]);
    }
}
