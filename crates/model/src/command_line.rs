//! Shows a command and its arguments as a shell would need them typed, so a
//! command line in an error message can be read (an empty argument is not
//! lost between two spaces) and pasted into a shell to try it by hand.

/// `words` joined by spaces, each quoted for a POSIX shell when it is empty
/// or holds anything but plain characters.
pub fn shown<S: AsRef<str>>(words: impl IntoIterator<Item = S>) -> String {
    words.into_iter().map(|w| quoted(w.as_ref())).collect::<Vec<_>>().join(" ")
}

fn quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%^".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    // Inside single quotes nothing is special; a single quote itself ends the
    // quoting, is escaped, and the quoting starts again.
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn empty_and_special_arguments_are_quoted_plain_ones_are_not() {
        assert_eq!(
            shown(["redis-server", "--port", "6379", "--save", "", "--appendonly", "no"]),
            "redis-server --port 6379 --save '' --appendonly no"
        );
        assert_eq!(shown(["sh", "-c", "redis-server --port 1 & sleep 2"]), "sh -c 'redis-server --port 1 & sleep 2'");
        assert_eq!(shown(["echo", "it's", "$HOME", "a*b", "x;y"]), r"echo 'it'\''s' '$HOME' 'a*b' 'x;y'");
        assert_eq!(shown(["--dir=/tmp/a_b", "k:1", "user@host"]), "--dir=/tmp/a_b k:1 user@host");
    }
}
