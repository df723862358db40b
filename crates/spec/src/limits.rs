//! Limits on a spec: the bounds of its values (rates, connections, cells),
//! and on its text, checked before the YAML is parsed for real: no
//! spec needs more than a mebibyte or deeper nesting than 64 levels, and the
//! full parser slows with the square of the nesting depth (100,000 brackets
//! took 19.5 s before it gave up). A streaming pass over yaml-rust2's events
//! finds the depth in one linear read that stops at the first level too deep.

use yaml_rust2::parser::{Event, Parser};

/// Open-loop rates whose period (1/rate) a `Duration` holds: at most one op
/// a day, at least a nanosecond between ops.
pub const MIN_OPEN_RATE: f64 = 1.0 / 86_400.0;
pub const MAX_OPEN_RATE: f64 = 1e9;

/// Client connections and ops in flight per connection: a history names its
/// writers with 16 bits, and every slot is allocated up front.
pub const MAX_CONNECTIONS: u32 = 10_000;
pub const MAX_IN_FLIGHT: u32 = 10_000;

pub const MAX_REPEATS: u32 = 1_000;

/// Cells a plan may hold: a history names its cell with 16 bits, and the plan
/// is built in memory before anything runs.
pub const MAX_CELLS: u64 = 10_000;
/// Contention rounds a cell may run (`distribution: rounds`), so every
/// round's key fits in a key number whatever the cell.
pub const MAX_ROUNDS: u64 = 1_000_000;

/// The largest spec file, and the largest text after `${param}` substitution.
pub const MAX_SPEC_BYTES: usize = 1 << 20;

/// The deepest nesting of mappings and sequences (flow or block).
pub const MAX_NESTING: usize = 64;

/// yaml-rust2's error when flow collections nest past its own limit.
const SCANNER_DEPTH_LIMIT: &str = "recursion limit exceeded";

/// A limit exceeded: 1-based line and column, and the message.
pub type Exceeded = (usize, usize, String);

/// Checks the size and the nesting depth of `text`. Syntax errors are left to
/// the parser that follows, which reports them with its own messages.
pub fn check(text: &str) -> Result<(), Exceeded> {
    if text.len() > MAX_SPEC_BYTES {
        let (line, column) = line_and_column(text, MAX_SPEC_BYTES);
        return Err((line, column, too_large_message()));
    }
    let too_deep = format!("nested deeper than {MAX_NESTING} levels; no spec needs this");
    let mut parser = Parser::new_from_str(text);
    let mut depth = 0usize;
    loop {
        let (event, mark) = match parser.next_token() {
            Ok(next) => next,
            // The scanner looks ahead past brackets packed on one line and
            // gives up at 255 open ones, before any event reaches us.
            Err(e) if e.info() == SCANNER_DEPTH_LIMIT => {
                return Err((e.marker().line(), e.marker().col() + 1, too_deep));
            }
            // The parser that reports the error comes next; it must not
            // meet deep nesting after the point this one gave up at.
            Err(_) => return flow_depth(text, &too_deep),
        };
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err((mark.line(), mark.col() + 1, too_deep));
                }
            }
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            Event::StreamEnd => return Ok(()),
            _ => {}
        }
    }
}

pub fn too_large_message() -> String {
    format!("the spec is larger than {} KiB; no spec needs this", MAX_SPEC_BYTES >> 10)
}

/// 1-based line and column (in characters) of byte `offset`, or of the last
/// character boundary before it.
pub fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (before.matches('\n').count() + 1, before[line_start..].chars().count() + 1)
}

/// The deepest run of flow brackets (`[` `{`), outside quotes and comments:
/// a coarse stand-in for the nesting check on text the event parser could
/// not read to its end (such a spec is refused anyway; this only keeps its
/// error fast).
fn flow_depth(text: &str, too_deep: &str) -> Result<(), Exceeded> {
    let mut depth = 0usize;
    for (i, line) in text.lines().enumerate() {
        let mut quote: Option<char> = None;
        for (col, c) in line.chars().enumerate() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '#') => break,
                (None, '[' | '{') => {
                    depth += 1;
                    if depth > MAX_NESTING {
                        return Err((i + 1, col + 1, too_deep.to_string()));
                    }
                }
                (None, ']' | '}') => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_after_a_syntax_error_is_refused_at_once() {
        let text = format!("name: x\n  bad: indentation: here\ngates: {}\n", "[".repeat(100_000));
        let started = std::time::Instant::now();
        let (line, _, message) = check(&text).unwrap_err();
        assert_eq!(line, 3);
        assert!(message.contains("nested deeper"), "{message}");
        // At once (milliseconds): a limit a busy machine's pauses do not
        // reach, far under the 19.5 s the full parser took on this text.
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
    }

    #[test]
    fn deep_nesting_is_refused_where_it_gets_too_deep() {
        for brackets in [100, 254, 255, 100_000] {
            let flow = format!("name: x\nkeys: {}{}\n", "[".repeat(brackets), "]".repeat(brackets));
            let started = std::time::Instant::now();
            let (line, column, message) = check(&flow).unwrap_err();
            assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
            assert_eq!(line, 2);
            // `keys: ` is 6 characters; the 64th bracket opens level 65 (the
            // root mapping is level 1), unless the scanner stopped first.
            assert!(column == 6 + 64 || brackets >= 255, "{brackets}: column {column}");
            assert!(message.contains("deeper than 64 levels"), "{message}");
        }
        let spread = format!("keys:\n{}", "  [\n".repeat(100_000));
        assert!(check(&spread).unwrap_err().0 <= 2 + 255);

        let block: String = (0..70).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
        assert_eq!(check(&block).unwrap_err().0, 65);
        let dashes = format!("x:\n{}1\n", "- ".repeat(100_000));
        assert_eq!(check(&dashes).unwrap_err().0, 2);
    }

    #[test]
    fn ordinary_specs_and_syntax_errors_pass_through() {
        let nested = format!("a: {}1{}\n", "[".repeat(63), "]".repeat(63));
        assert_eq!(check(&nested), Ok(()));
        assert_eq!(check("a: [1, 2\nb: {"), Ok(()));
        for spec in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../specs")).unwrap() {
            let path = spec.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                assert_eq!(check(&std::fs::read_to_string(&path).unwrap()), Ok(()), "{}", path.display());
            }
        }
    }

    #[test]
    fn oversized_text_is_refused_with_the_line_it_overflows_on() {
        let big = "# padding\n".repeat(MAX_SPEC_BYTES / 10 + 1);
        let (line, column, message) = check(&big).unwrap_err();
        assert_eq!((line, column), (MAX_SPEC_BYTES / 10 + 1, MAX_SPEC_BYTES % 10 + 1));
        assert!(message.contains("larger than 1024 KiB"), "{message}");
        assert_eq!(line_and_column("ab\ncé\n", 5), (2, 2));
    }
}
