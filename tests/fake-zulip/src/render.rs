//! A small subset of Zulip's Markdown: paragraphs, line breaks, fenced and
//! inline code, bold, and mentions, rendered to the HTML Zulip sends when
//! `apply_markdown` is true. The same tokenizer finds mentions for flags, so
//! a mention inside code is no mention, as in Zulip.

use crate::mentions::{MentionTarget, resolve_mention};
use crate::state::State;

/// A block of a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Block {
    /// Lines of a paragraph, joined with `\n`.
    Paragraph(String),
    /// The body of a fenced code block.
    Fence(String),
}

/// A piece of a paragraph.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inline<'a> {
    Text(&'a str),
    Code(&'a str),
    Bold(&'a str),
    /// `@**name**` or, silent, `@_**name**`; `raw` is the whole source.
    Mention {
        silent: bool,
        name: &'a str,
        raw: &'a str,
    },
}

/// Splits content into paragraphs and fenced code blocks.
pub(crate) fn blocks(content: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut para: Vec<&str> = Vec::new();
    let mut lines = content.lines();
    let flush = |para: &mut Vec<&str>, out: &mut Vec<Block>| {
        if !para.is_empty() {
            out.push(Block::Paragraph(para.join("\n")));
            para.clear();
        }
    };
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let fence = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f));
        if let Some(fence) = fence {
            flush(&mut para, &mut out);
            let mut body = Vec::new();
            for inner in lines.by_ref() {
                if inner.trim() == fence {
                    break;
                }
                body.push(inner);
            }
            out.push(Block::Fence(body.join("\n")));
        } else if line.trim().is_empty() {
            flush(&mut para, &mut out);
        } else {
            para.push(line);
        }
    }
    flush(&mut para, &mut out);
    out
}

/// Whether a mention may follow this character (`BEFORE_MENTION_ALLOWED_REGEX`).
fn mention_may_follow(prev: Option<char>) -> bool {
    prev.is_none_or(|c| c.is_whitespace() || "'\"({[/<".contains(c))
}

/// Splits a paragraph into inline pieces.
pub(crate) fn inlines(text: &str) -> Vec<Inline<'_>> {
    let mut out = Vec::new();
    let mut plain_start = 0;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < text.len() {
        let rest = &text[i..];
        let prev = text[..i].chars().next_back();
        let token = if rest.starts_with('`') {
            inline_code(rest)
        } else if rest.starts_with('@') && mention_may_follow(prev) {
            mention(rest)
        } else if rest.starts_with("**") {
            bold(rest)
        } else {
            None
        };
        match token {
            Some((len, inline)) => {
                if plain_start < i {
                    out.push(Inline::Text(&text[plain_start..i]));
                }
                out.push(inline);
                i += len;
                plain_start = i;
            }
            None => {
                // Step over one whole character (or a whole backtick run).
                let step = if bytes[i] == b'`' {
                    rest.bytes().take_while(|b| *b == b'`').count()
                } else {
                    rest.chars().next().map_or(1, char::len_utf8)
                };
                i += step;
            }
        }
    }
    if plain_start < text.len() {
        out.push(Inline::Text(&text[plain_start..]));
    }
    out
}

fn inline_code(rest: &str) -> Option<(usize, Inline<'_>)> {
    let run = rest.bytes().take_while(|b| *b == b'`').count();
    let fence = &rest[..run];
    let body = &rest[run..];
    let mut search = 0;
    while let Some(pos) = body[search..].find(fence) {
        let at = search + pos;
        let after = body[at + run..].bytes().take_while(|b| *b == b'`').count();
        if after == 0 {
            return Some((run + at + run, Inline::Code(&body[..at])));
        }
        search = at + run + after;
    }
    None
}

fn mention(rest: &str) -> Option<(usize, Inline<'_>)> {
    let silent = rest.starts_with("@_**");
    let open = if silent { 4 } else { 3 };
    if !silent && !rest.starts_with("@**") {
        return None;
    }
    let body = &rest[open..];
    let end = body.find('*')?;
    if end == 0 || !body[end..].starts_with("**") {
        return None;
    }
    let len = open + end + 2;
    Some((
        len,
        Inline::Mention {
            silent,
            name: &body[..end],
            raw: &rest[..len],
        },
    ))
}

fn bold(rest: &str) -> Option<(usize, Inline<'_>)> {
    let body = &rest[2..];
    let end = body.find("**")?;
    if end == 0 {
        return None;
    }
    Some((end + 4, Inline::Bold(&body[..end])))
}

/// Escapes text for HTML.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Renders message content to Zulip-style HTML.
pub(crate) fn render(state: &State, content: &str) -> String {
    let mut html = Vec::new();
    for block in blocks(content) {
        match block {
            Block::Fence(body) => html.push(format!(
                "<div class=\"codehilite\"><pre><span></span><code>{}\n</code></pre></div>",
                escape(&body)
            )),
            Block::Paragraph(text) => {
                let mut p = String::from("<p>");
                for inline in inlines(&text) {
                    p.push_str(&render_inline(state, &inline));
                }
                p.push_str("</p>");
                html.push(p);
            }
        }
    }
    html.join("\n")
}

fn render_inline(state: &State, inline: &Inline<'_>) -> String {
    match inline {
        Inline::Text(t) => escape(t).replace('\n', "<br>\n"),
        Inline::Code(c) => format!("<code>{}</code>", escape(c)),
        Inline::Bold(b) => format!("<strong>{}</strong>", escape(b)),
        Inline::Mention { silent, name, raw } => match resolve_mention(state, name) {
            Some(MentionTarget::User(id)) => {
                let name = state.users.get(&id).map_or("", |u| u.full_name.as_str());
                let inactive = state.users.get(&id).is_some_and(|u| !u.active);
                if *silent || inactive {
                    format!(
                        "<span class=\"user-mention silent\" data-user-id=\"{id}\">{}</span>",
                        escape(name)
                    )
                } else {
                    format!(
                        "<span class=\"user-mention\" data-user-id=\"{id}\">@{}</span>",
                        escape(name)
                    )
                }
            }
            Some(MentionTarget::StreamWildcard) => {
                let class = if *silent {
                    "user-mention channel-wildcard-mention silent"
                } else {
                    "user-mention channel-wildcard-mention"
                };
                let at = if *silent { "" } else { "@" };
                format!(
                    "<span class=\"{class}\" data-user-id=\"*\">{at}{}</span>",
                    escape(name)
                )
            }
            Some(MentionTarget::TopicWildcard) => {
                let class = if *silent {
                    "topic-mention silent"
                } else {
                    "topic-mention"
                };
                let at = if *silent { "" } else { "@" };
                format!("<span class=\"{class}\">{at}{}</span>", escape(name))
            }
            None => escape(raw),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_split_paragraphs_and_fences() {
        let got = blocks("one\ntwo\n\n```\n@**x**\n```\nthree");
        assert_eq!(
            got,
            vec![
                Block::Paragraph("one\ntwo".into()),
                Block::Fence("@**x**".into()),
                Block::Paragraph("three".into()),
            ]
        );
    }

    #[test]
    fn inlines_find_code_mentions_and_bold() {
        let got = inlines("hi @**Ann** `@**Bob**` x@**Cy** (@_**Di|5**) **b**");
        assert_eq!(
            got,
            vec![
                Inline::Text("hi "),
                Inline::Mention {
                    silent: false,
                    name: "Ann",
                    raw: "@**Ann**"
                },
                Inline::Text(" "),
                Inline::Code("@**Bob**"),
                Inline::Text(" x@"),
                Inline::Bold("Cy"),
                Inline::Text(" ("),
                Inline::Mention {
                    silent: true,
                    name: "Di|5",
                    raw: "@_**Di|5**"
                },
                Inline::Text(") "),
                Inline::Bold("b"),
            ]
        );
    }
}
