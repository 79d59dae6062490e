//! Log lines of bounded size: errors from the API server or a parser can quote whole objects or
//! list bodies, which have no place in a log line (megabytes in a large cluster, and possibly
//! sensitive). Every message built from such an error goes through [`bounded`].

/// The longest message text a log line carries; with its fields a line stays well under 2 KB.
pub const MAX_MESSAGE: usize = 512;

/// `text`, cut at [`MAX_MESSAGE`] bytes (on a character boundary) with a note of how much was cut.
pub fn bounded(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_MESSAGE {
        return text.into();
    }
    let mut end = MAX_MESSAGE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes cut)", &text[..end], text.len() - end).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        assert_eq!(bounded("short"), "short");
        let long = "é".repeat(1000);
        let cut = bounded(&long);
        assert!(cut.len() < MAX_MESSAGE + 40, "{}", cut.len());
        assert!(cut.ends_with("(1488 bytes cut)"), "{cut}");
    }
}
