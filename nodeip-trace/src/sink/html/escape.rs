//! Escaping for HTML and inline SVG: every string from the node (process names, host names,
//! pod names, hosts-file names) goes through [`Escaped`], so a process named
//! `<script>alert(1)</script>` renders as text.
use std::fmt;

/// Text made safe for HTML/SVG element content and quoted attribute values.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            f.write_str(match rest.as_bytes()[at] {
                b'&' => "&amp;",
                b'<' => "&lt;",
                b'>' => "&gt;",
                b'"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + 1..];
        }
        f.write_str(rest)
    }
}

/// `text` cut to at most `max` characters, with `…` when cut (labels that must fit a lane).
pub fn shortened(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if text.chars().count() > max => format!("{}…", &text[..at]).into(),
        _ => text.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_from_the_node_is_inert() {
        let hostile = r#"<script>alert(1)</script>"><img src=x onerror='y'>&amp;"#;
        let out = Escaped(hostile).to_string();
        assert_eq!(
            out,
            "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;amp;"
        );
        assert!(!out.contains(['<', '>', '"', '\'']));
    }

    #[test]
    fn shortening_counts_characters_not_bytes() {
        assert_eq!(shortened("abc", 3), "abc");
        assert_eq!(shortened("abcd", 3), "ab…");
        assert_eq!(shortened("→→→→", 3), "→→…");
        assert_eq!(shortened("", 3), "");
    }
}
