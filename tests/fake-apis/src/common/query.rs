//! Query strings and path segments, decoded without ever failing: a bad
//! escape stays as it was, and the endpoint then finds no match.

/// Decodes `a=1&b=2` into pairs, keeping order and duplicates.
pub(crate) fn parse_query(raw: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(raw.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

/// Encodes pairs as a query string.
pub(crate) fn encode_query(pairs: &[(String, String)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// Decodes `%XX` escapes in one path segment (`+` stays a plus).
pub(crate) fn decode_segment(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The last value of a parameter, as servers that keep the last one read it.
pub(crate) fn last<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_encodes() {
        assert_eq!(decode_segment("fix%2Fbranch"), "fix/branch");
        assert_eq!(decode_segment("50%"), "50%");
        assert_eq!(decode_segment("%zz"), "%zz");
        let pairs = parse_query("a=1&b=x%20y&a=2");
        assert_eq!(last(&pairs, "a"), Some("2"));
        assert_eq!(encode_query(&pairs), "a=1&b=x+y&a=2");
    }
}
