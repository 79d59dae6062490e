//! The items of a JSON list taken one at a time as its text arrives, for a list read from the
//! network: each element is handed on as soon as its end has been seen, so the list's text never
//! has to be held whole, and the list without its items (its head: `metadata` with the continue
//! token and the resourceVersion) is kept for the end.
//!
//! Like the scanners it is built on (`json_scan.rs`), this does not validate JSON: each element
//! and the head are for the caller to parse, and a text that is not a list fails that parse or
//! [`ListItems::finish`].

use crate::json_scan::{ElementEnds, JsonShape};

/// A JSON list (an object with an `items` array) cut into its elements as it is fed.
#[derive(Debug)]
pub struct ListItems {
    shape: JsonShape,
    ends: ElementEnds,
    /// Bytes fed so far.
    fed: usize,
    /// The element being gathered.
    element: Vec<u8>,
    /// Elements handed on so far.
    handed: usize,
    /// Whether the items' `]` has been seen (the last element handed on).
    closed: bool,
}

impl Default for ListItems {
    fn default() -> Self {
        ListItems {
            shape: JsonShape::new(),
            ends: ElementEnds::default(),
            fed: 0,
            element: Vec::new(),
            handed: 0,
            closed: false,
        }
    }
}

impl ListItems {
    /// Takes the next bytes of the text and hands each element completed in them to `each`, in
    /// order, as its JSON text (blank around it included). An empty element between two commas
    /// is handed on too, for its parse to fail as JSON does; only an empty list has none.
    pub fn feed<E>(
        &mut self,
        bytes: &[u8],
        each: &mut impl FnMut(Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        let start = self.fed;
        self.shape.feed(bytes);
        self.fed += bytes.len();
        let Some(open) = self.shape.items_start() else {
            return Ok(());
        };
        let end = self.shape.items_end();
        let from = open.clamp(start, self.fed) - start;
        let to = (end.unwrap_or(self.fed).clamp(start, self.fed) - start).max(from);
        let mut part = &bytes[from..to];
        while let Some(comma) = self.ends.next_separator(part) {
            self.element.extend_from_slice(&part[..comma]);
            part = &part[comma + 1..];
            self.hand_on(each)?;
        }
        self.element.extend_from_slice(part);
        if end.is_some() && !self.closed {
            self.closed = true;
            let empty_list = self.handed == 0 && self.element.iter().all(u8::is_ascii_whitespace);
            if !empty_list {
                self.hand_on(each)?;
            }
        }
        Ok(())
    }

    fn hand_on<E>(&mut self, each: &mut impl FnMut(Vec<u8>) -> Result<(), E>) -> Result<(), E> {
        self.handed += 1;
        each(std::mem::take(&mut self.element))
    }

    /// The number of elements handed on so far.
    pub fn handed(&self) -> usize {
        self.handed
    }

    /// The list without its items' elements (`"items": []` in their place), once the whole
    /// text has been fed; `None` if it is not one JSON object (or the object without its items
    /// is over a megabyte). An object without `items` is a list of none.
    pub fn finish(self) -> Option<String> {
        self.shape.into_head()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The elements and head of `text` fed `piece` bytes at a time.
    fn split(text: &str, piece: usize) -> (Vec<String>, Option<String>) {
        let mut items = ListItems::default();
        let mut elements = Vec::new();
        for bytes in text.as_bytes().chunks(piece) {
            items
                .feed(bytes, &mut |element| {
                    elements.push(String::from_utf8(element).unwrap());
                    Ok::<(), ()>(())
                })
                .unwrap();
        }
        assert_eq!(items.handed(), elements.len());
        (elements, items.finish())
    }

    #[test]
    fn elements_are_handed_on_whole_wherever_the_pieces_end() {
        let text = r#"{"kind": "List", "metadata": {"continue": "c"}, "items": [{"a": "],\"[,"}, {"b": [1, {"c": 2}]} ,3], "x": {"items": [9]}}"#;
        for piece in [1, 2, 3, 7, 64, text.len()] {
            let (elements, head) = split(text, piece);
            assert_eq!(
                elements,
                [r#"{"a": "],\"[,"}"#, r#" {"b": [1, {"c": 2}]} "#, "3"],
                "pieces of {piece}"
            );
            assert_eq!(
                head.as_deref(),
                Some(
                    r#"{"kind": "List", "metadata": {"continue": "c"}, "items": [], "x": {"items": [9]}}"#
                )
            );
        }
    }

    #[test]
    fn an_empty_list_has_no_element_and_an_empty_element_is_handed_on() {
        assert_eq!(split(r#"{"items": [ ]}"#, 2).0, Vec::<String>::new());
        assert_eq!(split(r#"{"items": [1,,2]}"#, 2).0, ["1", "", "2"]);
        assert_eq!(split(r#"{"items": [1, ]}"#, 2).0, ["1", " "]);
    }

    #[test]
    fn a_text_that_is_not_a_list_has_no_head() {
        for text in [r#"[{"a": 1}]"#, r#"{"items": [1]"#, r#"{"a": 1} {}"#] {
            assert_eq!(split(text, 3).1, None, "{text}");
        }
        let (elements, head) = split(r#"{"kind": "List", "items": null}"#, 3);
        assert!(elements.is_empty());
        assert_eq!(head.as_deref(), Some(r#"{"kind": "List", "items": null}"#));
    }

    #[test]
    fn the_callers_error_stops_the_feed() {
        let mut items = ListItems::default();
        let mut seen = 0;
        let result = items.feed(br#"{"items": [1, 2, 3]}"#, &mut |_| {
            seen += 1;
            if seen == 2 {
                Err("stop")
            } else {
                Ok(())
            }
        });
        assert_eq!(result, Err("stop"));
        assert_eq!(seen, 2);
    }
}
