//! Finds where a field path such as `scenarios[0].target` stands in the YAML
//! text, so errors found after parsing (an undefined target, say) can still
//! name a line and column.

use yaml_rust2::parser::{Event, Parser};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq)]
pub enum PathStep {
    Key(String),
    Index(usize),
}

/// Splits `a.b[2].c` into steps.
pub fn parse_path(path: &str) -> Vec<PathStep> {
    let mut steps = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            if open > 0 {
                steps.push(PathStep::Key(rest[..open].to_string()));
            }
            rest = &rest[open..];
            while let Some(stripped) = rest.strip_prefix('[') {
                let close = stripped.find(']').unwrap_or(stripped.len());
                if let Ok(i) = stripped[..close].parse() {
                    steps.push(PathStep::Index(i));
                }
                rest = stripped.get(close + 1..).unwrap_or("");
            }
        } else {
            steps.push(PathStep::Key(rest.to_string()));
        }
    }
    steps
}

/// The 1-based line and column of the value at `path`, or of the deepest
/// existing part of it (a missing field is reported where its parent is).
pub fn locate(text: &str, path: &[PathStep]) -> Option<(usize, usize)> {
    locate_depth(text, path).map(|(line, col, _)| (line, col))
}

/// Like [`locate`], but only when the whole path exists.
pub fn locate_exact(text: &str, path: &[PathStep]) -> Option<(usize, usize)> {
    match locate_depth(text, path)? {
        (line, col, depth) if depth == path.len() => Some((line, col)),
        _ => None,
    }
}

/// yaml-rust2's syntax error, with its 1-based line and column, if it finds one.
pub fn syntax_error(text: &str) -> Option<(usize, usize, String)> {
    let mut parser = Parser::new_from_str(text);
    loop {
        match parser.next_token() {
            Ok((Event::StreamEnd, _)) => return None,
            Ok(_) => {}
            Err(e) => return Some((e.marker().line(), e.marker().col() + 1, e.info().to_string())),
        }
    }
}

/// Where a second YAML document starts, if the text holds one.
pub fn second_document(text: &str) -> Option<(usize, usize)> {
    let mut parser = Parser::new_from_str(text);
    let mut documents = 0;
    loop {
        match parser.next_token().ok()? {
            (Event::DocumentStart, mark) => {
                documents += 1;
                if documents == 2 {
                    return Some((mark.line(), mark.col() + 1));
                }
            }
            (Event::StreamEnd, _) => return None,
            _ => {}
        }
    }
}

/// Line, column and how many steps of the path were found.
fn locate_depth(text: &str, path: &[PathStep]) -> Option<(usize, usize, usize)> {
    let mut parser = Parser::new_from_str(text);
    // Skip to the root node.
    loop {
        let (event, mark) = parser.next_token().ok()?;
        match event {
            Event::StreamStart | Event::DocumentStart => continue,
            Event::StreamEnd | Event::DocumentEnd => return None,
            _ => {
                let mut best = Some((mark.line(), mark.col() + 1));
                let mut depth = 0;
                walk(&mut parser, event, path, &mut best, &mut depth, 0).ok()?;
                return best.map(|(l, c)| (l, c, depth));
            }
        }
    }
}

/// Descends along `path` from a node whose first event is `event`; consumes the
/// whole node either way so the caller's position stays consistent.
fn walk(
    parser: &mut Parser<std::str::Chars<'_>>,
    event: Event,
    path: &[PathStep],
    best: &mut Option<(usize, usize)>,
    found: &mut usize,
    depth: usize,
) -> Result<(), ()> {
    match event {
        Event::MappingStart(..) => {
            loop {
                let (key, key_mark) = parser.next_token().map_err(|_| ())?;
                let key_text = match key {
                    Event::MappingEnd => return Ok(()),
                    Event::Scalar(s, ..) => Some(s),
                    other => {
                        skip(parser, other)?;
                        None
                    }
                };
                let (value, value_mark) = parser.next_token().map_err(|_| ())?;
                let on_path = matches!((path.first(), &key_text), (Some(PathStep::Key(k)), Some(t)) if k == t);
                if on_path {
                    // Point at the value, or at the key when the value is a block
                    // collection that starts on a later line.
                    let mark = if matches!(value, Event::Scalar(..)) { value_mark } else { key_mark };
                    *best = Some((mark.line(), mark.col() + 1));
                    *found = depth + 1;
                    walk(parser, value, &path[1..], best, found, depth + 1)?;
                } else {
                    skip(parser, value)?;
                }
            }
        }
        Event::SequenceStart(..) => {
            let mut index = 0;
            loop {
                let (item, mark) = parser.next_token().map_err(|_| ())?;
                if matches!(item, Event::SequenceEnd) {
                    return Ok(());
                }
                if path.first() == Some(&PathStep::Index(index)) {
                    *best = Some((mark.line(), mark.col() + 1));
                    *found = depth + 1;
                    walk(parser, item, &path[1..], best, found, depth + 1)?;
                } else {
                    skip(parser, item)?;
                }
                index += 1;
            }
        }
        _ => Ok(()),
    }
}

fn skip(parser: &mut Parser<std::str::Chars<'_>>, event: Event) -> Result<(), ()> {
    // An empty path matches nothing, so this only consumes the node.
    walk(parser, event, &[], &mut None, &mut 0, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name: x\ntargets:\n  cache:\n    kind: redis\nscenarios:\n  - name: a\n    target: nope\n  - name: b\n    profiles: [p1, p2]\n";

    #[test]
    fn finds_nested_map_and_sequence_values() {
        assert_eq!(locate(TEXT, &parse_path("targets.cache.kind")), Some((4, 11)));
        assert_eq!(locate(TEXT, &parse_path("scenarios[0].target")), Some((7, 13)));
        assert_eq!(locate(TEXT, &parse_path("scenarios[1].profiles[1]")), Some((9, 20)));
    }

    #[test]
    fn finds_a_second_document() {
        assert_eq!(second_document("a: 1\n---\nb: 2\n"), Some((2, 1)));
        assert_eq!(second_document("a: 1\n"), None);
        assert_eq!(syntax_error("a: 1\n"), None);
        assert!(syntax_error("a: {b: 1, c: ").is_some());
    }

    #[test]
    fn missing_fields_point_at_their_parent() {
        let (line, _) = locate(TEXT, &parse_path("scenarios[1].workload")).unwrap();
        assert_eq!(line, 8);
        assert_eq!(locate_exact(TEXT, &parse_path("scenarios[1].workload")), None);
        assert_eq!(locate_exact(TEXT, &parse_path("scenarios[1].name")), Some((8, 11)));
    }
}
