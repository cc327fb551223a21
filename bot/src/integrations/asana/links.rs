//! Links in a task's notes, which the filters read (a Figma link means a
//! design task) and the analysis sees. Pure: plain text in, URLs out.

use url::Url;

/// Characters that end a URL in running text: whitespace and what RFC 3986
/// never allows unescaped.
fn ends_url(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c, '<' | '>' | '"' | '`' | '{' | '}' | '|' | '\\' | '^')
}

/// Trailing characters that belong to the sentence, not the URL.
const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', '\'', '*', '_', '~'];

/// Drops the sentence's punctuation from the end of a URL: full stops,
/// commas, quotes, and closing brackets that have no opening one inside the
/// URL (so `https://en.wikipedia.org/wiki/Rust_(language)` keeps its `)`,
/// and `(see https://x.io/a)` loses its).
fn trim_trailing(mut url: &str) -> &str {
    loop {
        let Some(last) = url.chars().next_back() else {
            return url;
        };
        let unbalanced = |open: char, close: char| {
            last == close && url.matches(open).count() < url.matches(close).count()
        };
        if TRAILING.contains(&last) || unbalanced('(', ')') || unbalanced('[', ']') {
            url = &url[..url.len() - last.len_utf8()];
        } else {
            return url;
        }
    }
}

/// The `http` and `https` URLs in `notes`, in order of first appearance,
/// each once, with trailing punctuation trimmed. A scheme glued to a word
/// (`xhttps://…`) or without a host is not a link.
pub fn extract_links(notes: &str) -> Vec<String> {
    // ASCII lower-casing keeps every byte offset, so indices carry over.
    let lower = notes.to_ascii_lowercase();
    let mut links: Vec<String> = Vec::new();
    let mut from = 0;
    while let Some(found) = lower[from..].find("http") {
        let start = from + found;
        from = start + "http".len();
        let rest = &lower[start..];
        if !(rest.starts_with("http://") || rest.starts_with("https://")) {
            continue;
        }
        let glued = notes[..start]
            .chars()
            .next_back()
            .is_some_and(char::is_alphanumeric);
        let len = notes[start..].find(ends_url).unwrap_or(notes.len() - start);
        let candidate = trim_trailing(&notes[start..start + len]);
        from = start + len.max(1);
        if glued {
            continue;
        }
        let has_host = Url::parse(candidate)
            .ok()
            .and_then(|u| u.host_str().map(|h| !h.is_empty()))
            .unwrap_or(false);
        if has_host && !links.iter().any(|l| l == candidate) {
            links.push(candidate.to_owned());
        }
    }
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_in_notes() {
        #[rustfmt::skip]
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("no links here, just http talk", &[]),
            ("see https://figma.com/file/abc.", &["https://figma.com/file/abc"]),
            ("a http://x.io/a?b=1&c=2, then more", &["http://x.io/a?b=1&c=2"]),
            ("twice: https://x.io https://x.io and https://y.io", &["https://x.io", "https://y.io"]),
            ("(see https://x.io/a)", &["https://x.io/a"]),
            ("https://en.wikipedia.org/wiki/Rust_(language)!", &["https://en.wikipedia.org/wiki/Rust_(language)"]),
            ("[PR](https://github.com/acme/app/pull/1)", &["https://github.com/acme/app/pull/1"]),
            ("<https://x.io/path>", &["https://x.io/path"]),
            ("\"https://x.io/q\"", &["https://x.io/q"]),
            ("'https://x.io/q'?", &["https://x.io/q"]),
            ("HTTPS://Example.COM/Path", &["HTTPS://Example.COM/Path"]),
            ("line one\nhttps://a.io\thttps://b.io\r\n", &["https://a.io", "https://b.io"]),
            ("xhttps://glued.io and https:// alone and http://", &[]),
            ("ftp://files.io mailto:a@b.io", &[]),
            ("https://x.io/a...", &["https://x.io/a"]),
            ("https://x.io/ünïcode — dash", &["https://x.io/ünïcode"]),
            ("https://[::1]:8080/x]", &["https://[::1]:8080/x"]),
            ("Ünïcödé before https://x.io", &["https://x.io"]),
        ];
        for (notes, expected) in cases {
            assert_eq!(extract_links(notes), *expected, "{notes:?}");
        }
    }

    #[test]
    fn never_panics_on_odd_text() {
        for notes in [
            "http",
            "https:",
            "h",
            "ééhttp://",
            "http://é",
            "https://a.io(((",
            "))))https://a.io))",
        ] {
            let _ = extract_links(notes);
        }
    }
}
