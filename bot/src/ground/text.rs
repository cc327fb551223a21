//! Small text helpers shared by the transports and the store: Unicode
//! case-insensitive comparison of channel and topic names, splitting long
//! replies, invisible characters made visible, and hex of digests.

use unicase::UniCase;

/// Whether two channel or topic names are equal ignoring case, with Unicode
/// rules (`"Über"` equals `"über"`; SQLite's `NOCASE` only folds ASCII).
pub fn eq_fold(a: &str, b: &str) -> bool {
    UniCase::new(a) == UniCase::new(b)
}

/// A case-folded key for a name, for storing and looking up names in the
/// database without relying on the database's collation.
pub fn fold_key(name: &str) -> String {
    // Full Unicode lower-casing; the same folding UniCase compares with for
    // every name Zulip allows in practice.
    name.to_lowercase()
}

/// `text` with every Zulip mention made inert: `@**…**` (people and the
/// wildcards `all`, `everyone`, `channel`, `topic`), `@_**…**` and user
/// groups `@*…*` get a zero-width space after the `@`, so echoed text never
/// pings anyone and reads the same. Linear in the text.
pub fn neutralize_mentions(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '@' && matches!(chars.peek(), Some('*') | Some('_')) {
            out.push('\u{200B}');
        }
    }
    out
}

/// `text` as one line of at most `max_chars` characters: line breaks and
/// other control characters become spaces, runs of spaces collapse, and a
/// cut is marked with `…`. For text from workers and plugins that Eagle
/// shows: it cannot forge a line of its own.
pub fn one_line(text: &str, max_chars: usize) -> String {
    line(text, max_chars, false)
}

/// [`one_line`] for text an approver decides on: line breaks and tabs
/// become spaces, and every other code point that would not show
/// ([`is_invisible`]) is written as its code point, `<U+202E>`, so that what
/// is read is what is there (but for the zero-width space of a mention made
/// inert, which reads as it did). An escape is never cut in two.
pub fn visible_line(text: &str, max_chars: usize) -> String {
    line(text, max_chars, true)
}

fn line(text: &str, max_chars: usize, escape: bool) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars * 4));
    let mut count = 0;
    let mut space = false;
    let mut chars = text.chars().peekable();
    let mut previous = None;
    while let Some(c) = chars.next() {
        let blank = matches!(c, '\t' | '\n' | '\r' | '\u{b}' | '\u{c}')
            || (!escape && (c.is_control() || c == '\u{2028}' || c == '\u{2029}'));
        // A mention made inert ([`neutralize_mentions`]) stays as it reads.
        let inert_mention =
            c == '\u{200B}' && previous == Some('@') && matches!(chars.peek(), Some('*' | '_'));
        previous = Some(c);
        let shown = if blank {
            " ".to_string()
        } else if escape && is_invisible(c) && !inert_mention {
            code_point(c)
        } else {
            c.to_string()
        };
        if shown == " " {
            if space || count == 0 {
                continue;
            }
            space = true;
        } else {
            space = false;
        }
        let width = shown.chars().count();
        if count + width > max_chars {
            let trimmed = out.trim_end().len();
            out.truncate(trimmed);
            out.push('…');
            return out;
        }
        out.push_str(&shown);
        count += width;
    }
    out.trim_end().to_string()
}

/// Whether `c` shows nothing, or changes how the text around it shows,
/// where people read it: control characters, format characters (Unicode's
/// `Cf`: bidirectional controls, zero-width characters, tag characters,
/// the soft hyphen, …), the line and paragraph separators, variation
/// selectors and the other default-ignorable code points (fillers,
/// reserved ones that a newer font may draw as nothing).
pub fn is_invisible(c: char) -> bool {
    use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
    matches!(
        c.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
    ) || matches!(
        c,
        // Unicode's Default_Ignorable_Code_Point, whatever their category.
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// `c` written as its code point: `<U+202E>`, `<U+E0041>`.
fn code_point(c: char) -> String {
    format!("<U+{:04X}>", u32::from(c))
}

/// `text` with every code point that would not show ([`is_invisible`])
/// written as its code point (`<U+202E>`), and how many there were; line
/// breaks and tabs are kept. For a text shown whole (`!show`).
pub fn escape_invisible(text: &str) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut escaped = 0;
    for c in text.chars() {
        if c != '\n' && c != '\t' && is_invisible(c) {
            escaped += 1;
            out.push_str(&code_point(c));
        } else {
            out.push(c);
        }
    }
    (out, escaped)
}

/// Splits `text` into parts of at most `max_chars` characters (Unicode code
/// points, which is how Zulip counts), preferring to cut at line breaks, then
/// at spaces. Nothing is dropped: joining the parts gives back the text, up to
/// the whitespace at the cuts. Code fences cut in two are closed and reopened.
/// Linear in the text: each part looks at most `max_chars` ahead.
pub fn split_message(text: &str, max_chars: usize) -> Vec<String> {
    split_message_capped(text, max_chars, usize::MAX).0
}

/// [`split_message`], stopping after `max_parts` parts; the flag says
/// whether text was left over.
pub fn split_message_capped(text: &str, max_chars: usize, max_parts: usize) -> (Vec<String>, bool) {
    let max_chars = max_chars.max(32);
    if text.char_indices().nth(max_chars).is_none() {
        return (vec![text.to_string()], false);
    }
    // Leave room for a fence to be closed at the end of a part and reopened at the start of the next.
    let budget = max_chars - 8;
    let mut parts = Vec::new();
    let mut rest = text;
    let mut reopen_fence = false;
    while !rest.is_empty() {
        if parts.len() >= max_parts {
            return (parts, true);
        }
        let prefix = if reopen_fence { "```\n" } else { "" };
        let room = budget - prefix.chars().count();
        let Some((hard_end, _)) = rest.char_indices().nth(room) else {
            parts.push(format!("{prefix}{rest}"));
            break;
        };
        let window = &rest[..hard_end];
        let cut = window
            .rfind('\n')
            .filter(|&i| i > 0)
            .or_else(|| window.rfind(' ').filter(|&i| i > 0))
            .unwrap_or(hard_end);
        let head = &rest[..cut];
        let mut part = format!("{prefix}{head}");
        let fences_open = (reopen_fence as usize + count_fence_lines(head)) % 2 == 1;
        if fences_open {
            part.push_str("\n```");
        }
        reopen_fence = fences_open;
        parts.push(part);
        rest = rest[cut..].trim_start_matches([' ', '\n']);
    }
    (parts, false)
}

fn count_fence_lines(text: &str) -> usize {
    text.lines()
        .filter(|line| line.trim_start().starts_with("```"))
        .count()
}

/// The message of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// `bytes` in lower-case hex (digests: content hashes, parameter hashes,
/// tokens).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_is_unicode_aware() {
        assert!(eq_fold("Executor", "executor"));
        assert!(eq_fold("ИСПОЛНИТЕЛЬ", "исполнитель"));
        assert!(eq_fold("Über", "über"));
        assert!(!eq_fold("run 42", "run 43"));
        assert_eq!(fold_key("Run ÄÖ"), "run äö");
    }

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split_message("hello", 100), vec!["hello"]);
    }

    #[test]
    fn long_text_is_split_without_loss() {
        let lines: Vec<String> = (0..500).map(|i| format!("line number {i}")).collect();
        let text = lines.join("\n");
        let parts = split_message(&text, 1000);
        assert!(parts.len() > 1);
        for part in &parts {
            assert!(
                part.chars().count() <= 1000,
                "part too long: {}",
                part.len()
            );
        }
        let rejoined: Vec<&str> = parts.iter().flat_map(|p| p.lines()).collect();
        assert_eq!(rejoined, lines);
    }

    #[test]
    fn split_counts_code_points_not_bytes() {
        let text = "ж".repeat(2500);
        let parts = split_message(&text, 1000);
        assert!(parts.iter().all(|p| p.chars().count() <= 1000));
        assert_eq!(parts.concat(), text);
    }

    #[test]
    fn a_fence_cut_in_two_is_closed_and_reopened() {
        let body: Vec<String> = (0..300).map(|i| format!("code {i}")).collect();
        let text = format!("before\n```\n{}\n```\nafter", body.join("\n"));
        let parts = split_message(&text, 500);
        assert!(parts.len() > 2);
        for part in &parts {
            assert_eq!(
                count_fence_lines(part) % 2,
                0,
                "unbalanced fence in {part:?}"
            );
        }
    }

    #[test]
    fn a_capped_split_stops_early() {
        let text = "word ".repeat(100_000);
        let (parts, cut) = split_message_capped(&text, 1000, 3);
        assert_eq!(parts.len(), 3);
        assert!(cut);
        let (all, cut) = split_message_capped("short", 1000, 3);
        assert_eq!((all.len(), cut), (1, false));
    }

    #[test]
    fn mentions_are_made_inert() {
        for (input, want) in [
            ("@**all** look", "@\u{200B}**all** look"),
            ("hi @_**Alex|3**", "hi @\u{200B}_**Alex|3**"),
            ("@*admins* and a@b.c", "@\u{200B}*admins* and a@b.c"),
            ("plain @ sign", "plain @ sign"),
            ("trailing @", "trailing @"),
        ] {
            assert_eq!(neutralize_mentions(input), want);
        }
    }

    #[test]
    fn one_line_removes_breaks_and_caps() {
        assert_eq!(one_line("a\nb\r\n\tc", 80), "a b c");
        assert_eq!(one_line("  x  ", 80), "x");
        assert_eq!(one_line("\u{1b}[31mred", 80), "[31mred");
        assert_eq!(one_line("abcdefgh", 5), "abcde…");
        assert_eq!(one_line("ab cd efgh", 6), "ab cd…");
        assert_eq!(one_line("жжжж", 3), "жжж…");
    }

    #[test]
    fn what_does_not_show_is_written_as_its_code_point() {
        // Tag characters (an invisible "ignore"), bidi controls and
        // isolates, zero-width characters, a variation selector, the line
        // and paragraph separators, a soft hyphen, an escape, other Cf.
        let sneaky = "ok\u{E0069}\u{E0067}\u{202E}cba\u{202C}\u{2066}x\u{2069}\u{200B}\u{200D}\u{FE0F}\
                      \u{2028}\u{2029}\u{AD}\u{1b}\u{600}\u{FFF9}\u{E0001}\u{E01EF}\u{180E}\u{3164}";
        let (shown, escaped) = escape_invisible(&format!("{sneaky}\n\tend\r"));
        assert_eq!(
            shown,
            "ok<U+E0069><U+E0067><U+202E>cba<U+202C><U+2066>x<U+2069><U+200B><U+200D><U+FE0F>\
             <U+2028><U+2029><U+00AD><U+001B><U+0600><U+FFF9><U+E0001><U+E01EF><U+180E>\
             <U+3164>\n\tend<U+000D>"
        );
        assert_eq!(escaped, 20);
        assert!(
            shown
                .chars()
                .all(|c| !is_invisible(c) || c == '\n' || c == '\t')
        );
        // Ordinary text of every script is left alone.
        for plain in ["Fix the tab preview", "Über жж 漢字 ✓ 👍 café", "a\u{301}"] {
            assert_eq!(escape_invisible(plain), (plain.to_string(), 0), "{plain}");
        }
        // On one line: breaks and tabs become spaces, the rest is written
        // out, and a cut never splits an escape.
        assert_eq!(
            visible_line("a\u{202E}b\n\tc\u{2028}d", 80),
            "a<U+202E>b c<U+2028>d"
        );
        assert_eq!(visible_line("ab\u{202E}cd", 6), "ab…");
        assert_eq!(visible_line("ab\u{202E}cd", 10), "ab<U+202E>…");
        assert_eq!(visible_line("\u{1b}[31mred", 80), "<U+001B>[31mred");
        // A mention made inert reads as before; other zero-width spaces do not.
        let inert = neutralize_mentions("@**all** @_**Alex|3** a\u{200B}b @\u{200B}x");
        assert_eq!(
            visible_line(&inert, 80),
            "@\u{200B}**all** @\u{200B}_**Alex|3** a<U+200B>b @<U+200B>x"
        );
    }

    #[test]
    fn hex_is_lower_case_two_digits_a_byte() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
    }
}
