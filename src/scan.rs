//! A zero-copy reader for the lists the host hands back.
//!
//! Lists are the policy's one large input (a megabyte at 4,000 HelmReleases) and the policy
//! reads four fields of each item. Decoding them with serde visits every byte through the
//! generic deserializer; this walks the bytes once, borrows the strings it is asked for and
//! skips the rest eight bytes at a time. It checks the grammar of everything it walks, skipped
//! parts included, so a truncated or malformed response is an error, never a shorter list.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
#[error("{what} at byte {at}")]
pub struct ScanError {
    what: &'static str,
    at: usize,
}

/// Deeper than any Kubernetes object; bounds the recursion on hostile input.
const MAX_DEPTH: usize = 128;

/// A JSON string as written in the input.
#[derive(Debug, Clone, Copy)]
pub struct Str<'a> {
    /// The string with its quotes: a slice of text already known to be UTF-8, so borrowing it
    /// needs no second check.
    quoted: &'a str,
    escaped: bool,
}

impl<'a> Str<'a> {
    fn content(&self) -> &'a [u8] {
        self.content_text().as_bytes()
    }

    fn content_text(&self) -> &'a str {
        &self.quoted[1..self.quoted.len() - 1]
    }

    /// Whether the string equals `text`; object keys are compared without decoding.
    pub fn is(&self, text: &str) -> bool {
        if self.escaped {
            self.text().is_ok_and(|s| s == text)
        } else {
            self.content() == text.as_bytes()
        }
    }

    /// Where the string's text lies in `document`, the text it was read from; `None` when it
    /// has escapes, so that the span is the text itself.
    pub fn span(&self, document: &str) -> Option<Range<usize>> {
        if self.escaped {
            return None;
        }
        let start = (self.quoted.as_ptr() as usize).checked_sub(document.as_ptr() as usize)? + 1;
        let end = start + self.quoted.len().checked_sub(2)?;
        (end <= document.len()).then_some(start..end)
    }

    /// The first of `texts` this string equals.
    pub fn which<'t>(&self, texts: &[&'t str]) -> Option<&'t str> {
        texts.iter().copied().find(|text| self.is(text))
    }

    /// The string's text: borrowed unless it has escapes.
    pub fn text(&self) -> Result<Cow<'a, str>, ScanError> {
        if self.escaped {
            serde_json::from_str::<String>(self.quoted)
                .map(Cow::Owned)
                .map_err(|_| ScanError {
                    what: "invalid string",
                    at: 0,
                })
        } else {
            Ok(Cow::Borrowed(self.content_text()))
        }
    }
}

/// A place in a document, with the nesting there.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    pos: usize,
    depth: usize,
}

/// A cursor over one JSON document.
pub struct Reader<'a> {
    text: &'a str,
    pos: usize,
    depth: usize,
}

/// The values an object's reader refused, by key, until a later value of the key is read
/// (`Reader::object_last_wins`). Not generic, so that each reader shares one copy of it.
#[derive(Default)]
struct Refused<'a>(Vec<(Cow<'a, str>, ScanError)>);

impl<'a> Refused<'a> {
    /// Files the outcome of reading the value of `key` that started at `mark`.
    #[inline(never)]
    fn note(
        &mut self,
        r: &mut Reader<'a>,
        key: Str<'a>,
        mark: Mark,
        outcome: Result<(), ScanError>,
    ) -> Result<(), ScanError> {
        if !self.0.is_empty() {
            let name = key.text()?;
            self.0.retain(|(other, _)| *other != name);
        }
        if let Err(err) = outcome {
            r.rewind(mark);
            r.skip()?;
            self.0.push((key.text()?, err));
        }
        Ok(())
    }

    fn finish(self) -> Result<(), ScanError> {
        match self.0.into_iter().next() {
            Some((_, err)) => Err(err),
            None => Ok(()),
        }
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `word` that is a quote, a backslash or a control character.
/// Borrows can flag bytes above the first real match, so only the lowest flag is exact.
fn specials(word: u64) -> u64 {
    let quote = word ^ (ONES * u64::from(b'"'));
    let backslash = word ^ (ONES * u64::from(b'\\'));
    let zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    (zero(quote) | zero(backslash) | control) & HIGHS
}

impl<'a> Reader<'a> {
    pub fn new(text: &'a str) -> Self {
        Reader {
            text,
            pos: 0,
            depth: 0,
        }
    }

    /// The document's bytes, which the grammar is walked on.
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn error(&self, what: &'static str) -> ScanError {
        ScanError { what, at: self.pos }
    }

    /// The next byte past any whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        while let Some(&b) = self.bytes().get(self.pos) {
            if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                return Some(b);
            }
            self.pos += 1;
        }
        None
    }

    fn eat(&mut self, byte: u8, what: &'static str) -> Result<(), ScanError> {
        if self.peek() != Some(byte) {
            return Err(self.error(what));
        }
        self.pos += 1;
        Ok(())
    }

    fn enter(&mut self) -> Result<(), ScanError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error("nesting too deep"));
        }
        Ok(())
    }

    /// Where the next value starts, past any whitespace.
    pub fn value_start(&mut self) -> usize {
        self.peek();
        self.pos
    }

    /// Where the reader stands, to come back to with [`Reader::rewind`].
    pub fn mark(&mut self) -> Mark {
        Mark {
            pos: self.value_start(),
            depth: self.depth,
        }
    }

    /// Back to `mark`, e.g. to skip a value whose reading was refused part-way.
    pub fn rewind(&mut self, mark: Mark) {
        (self.pos, self.depth) = (mark.pos, mark.depth);
    }

    /// Where the reader stands: past the last value read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Only whitespace may follow the document.
    pub fn end(&mut self) -> Result<(), ScanError> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(self.error("trailing characters")),
        }
    }

    /// A string value.
    pub fn string(&mut self) -> Result<Str<'a>, ScanError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("expected a string"));
        }
        let start = self.pos;
        let mut pos = start + 1;
        let mut escaped = false;
        loop {
            // Eight bytes at a time up to the next quote, backslash or control character.
            // A borrowed array, read as one load (a copy into a local array is a `memory.copy`
            // call per word in wasm).
            while let Some(word) = self.bytes().get(pos..).and_then(<[u8]>::first_chunk::<8>) {
                let found = specials(u64::from_le_bytes(*word));
                if found != 0 {
                    pos += (found.trailing_zeros() / 8) as usize;
                    break;
                }
                pos += 8;
            }
            match self.bytes().get(pos) {
                Some(b'"') => {
                    self.pos = pos + 1;
                    return Ok(Str {
                        // Both ends are quotes, so both are character boundaries.
                        quoted: &self.text[start..self.pos],
                        escaped,
                    });
                }
                Some(b'\\') => {
                    escaped = true;
                    match self.bytes().get(pos + 1) {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => pos += 2,
                        Some(b'u') => match self.unicode_escape(pos) {
                            Some(end) => pos = end,
                            None => {
                                self.pos = pos;
                                return Err(self.error("invalid unicode escape"));
                            }
                        },
                        _ => {
                            self.pos = pos;
                            return Err(self.error("invalid escape"));
                        }
                    }
                }
                Some(&b) if b < 0x20 => {
                    self.pos = pos;
                    return Err(self.error("control character in a string"));
                }
                Some(_) => pos += 1,
                None => {
                    self.pos = pos;
                    return Err(self.error("unterminated string"));
                }
            }
        }
    }

    /// The end of the `\\uXXXX` escape at `at` (two of them for a surrogate pair), as
    /// serde_json reads them: four hex digits, a high surrogate followed by a low one, no lone
    /// surrogate.
    fn unicode_escape(&self, at: usize) -> Option<usize> {
        let hex = |from: usize| -> Option<u32> {
            let digits = self.bytes().get(from..from + 4)?;
            let text = std::str::from_utf8(digits).ok()?;
            if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            u32::from_str_radix(text, 16).ok()
        };
        match hex(at + 2)? {
            0xDC00..=0xDFFF => None,
            0xD800..=0xDBFF => {
                if self.bytes().get(at + 6..at + 8) != Some(b"\\u".as_slice()) {
                    return None;
                }
                matches!(hex(at + 8)?, 0xDC00..=0xDFFF).then_some(at + 12)
            }
            _ => Some(at + 6),
        }
    }

    /// `read` the next value unless it is `null`.
    pub fn unless_null(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<(), ScanError>,
    ) -> Result<(), ScanError> {
        if self.null()? { Ok(()) } else { read(self) }
    }

    /// The next value as written, checked: what serde_json's `RawValue` borrows.
    pub fn raw_value(&mut self) -> Result<&'a str, ScanError> {
        let start = self.value_start();
        self.skip()?;
        Ok(&self.text[start..self.pos])
    }

    /// Consumes a `null` if one is next.
    pub fn null(&mut self) -> Result<bool, ScanError> {
        if self.peek() == Some(b'n') {
            self.literal(b"null")?;
            return Ok(true);
        }
        Ok(false)
    }

    fn literal(&mut self, word: &'static [u8]) -> Result<(), ScanError> {
        if !self.bytes()[self.pos..].starts_with(word) {
            return Err(self.error("invalid literal"));
        }
        self.pos += word.len();
        Ok(())
    }

    fn number(&mut self) -> Result<(), ScanError> {
        let start = self.pos;
        if self.bytes().get(self.pos) == Some(&b'-') {
            self.pos += 1;
        }
        let digits = |r: &mut Self| {
            let from = r.pos;
            while r.bytes().get(r.pos).is_some_and(u8::is_ascii_digit) {
                r.pos += 1;
            }
            r.pos > from
        };
        // No leading zeros: `0` stands alone.
        let mut valid = if self.bytes().get(self.pos) == Some(&b'0') {
            self.pos += 1;
            true
        } else {
            digits(self)
        };
        if valid && self.bytes().get(self.pos) == Some(&b'.') {
            self.pos += 1;
            valid = digits(self);
        }
        if valid && matches!(self.bytes().get(self.pos), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.bytes().get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            valid = digits(self);
        }
        // serde_json refuses a number it cannot represent (`1e400`); ask it, numbers are rare.
        if !valid || serde_json::from_str::<serde_json::Value>(&self.text[start..self.pos]).is_err()
        {
            self.pos = start;
            return Err(self.error("invalid number"));
        }
        Ok(())
    }

    /// An object: `field` is called with each key and must consume its value; its errors, of
    /// any type a scan error converts into, end the walk. Compiled for each caller's closure:
    /// the lists' readers run it for every item, and inlined it is a fifth faster there.
    pub fn object<E: From<ScanError>>(
        &mut self,
        mut field: impl FnMut(&mut Self, Str<'a>) -> Result<(), E>,
    ) -> Result<(), E> {
        self.eat(b'{', "expected an object")?;
        self.enter()?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                let key = self.string()?;
                self.eat(b':', "expected ':'")?;
                field(self, key)?;
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error("expected ',' or '}'").into()),
                }
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// An object read as serde_json reads one into a map, where of a key given twice the last
    /// value counts: `field` reads a value, and one it refuses (a type it does not take) is
    /// skipped, still checked, its refusal standing only if no later value of that key is read.
    /// For the host's answers, which the policy must read as the reference reader does.
    pub fn object_last_wins(
        &mut self,
        mut field: impl FnMut(&mut Self, Str<'a>) -> Result<(), ScanError>,
    ) -> Result<(), ScanError> {
        let mut refused = Refused::default();
        self.object(|r, key| {
            // Where the value starts, white space and all: no look ahead on the usual path.
            let mark = Mark {
                pos: r.pos,
                depth: r.depth,
            };
            match field(r, key) {
                // The usual case, kept inline: read, and nothing refused before.
                Ok(()) if refused.0.is_empty() => Ok(()),
                outcome => refused.note(r, key, mark, outcome),
            }
        })?;
        refused.finish()
    }

    /// An array: `item` is called for each element and must consume it.
    pub fn array<E: From<ScanError>>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<(), E>,
    ) -> Result<(), E> {
        self.eat(b'[', "expected an array")?;
        self.enter()?;
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                item(self)?;
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(self.error("expected ',' or ']'").into()),
                }
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// Any value, checked and thrown away.
    pub fn skip(&mut self) -> Result<(), ScanError> {
        match self.peek() {
            Some(b'"') => self.string().map(drop),
            Some(b'{') => self.object(|r, _| r.skip()),
            Some(b'[') => self.array(Self::skip),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("expected a value")),
            None => Err(self.error("unexpected end")),
        }
    }
}

/// A host's answer as text: every list is JSON, and JSON is UTF-8.
pub fn text(bytes: Vec<u8>) -> Result<String, ScanError> {
    String::from_utf8(bytes).map_err(|err| ScanError {
        what: "invalid UTF-8",
        at: err.utf8_error().valid_up_to(),
    })
}

/// Reads each element of a list response's `items` (absent or null: none) with `item`, and
/// checks the whole document. As serde_json reads it: of a key given twice the last one counts.
pub fn list_items<'a, T>(
    text: &'a str,
    mut item: impl FnMut(&mut Reader<'a>) -> Result<T, ScanError>,
) -> Result<Vec<T>, ScanError> {
    let mut reader = Reader::new(text);
    let mut items = Vec::new();
    reader.object_last_wins(|r, key| {
        if key.is("items") {
            items.clear();
            r.unless_null(|r| r.array(|r| item(r).map(|i| items.push(i))))
        } else {
            r.skip()
        }
    })?;
    reader.end()?;
    Ok(items)
}

/// The fields of an object that may be null: `field` reads the value of a key it wants and
/// says so with `true`; the values of the other keys are skipped.
pub fn fields<'a>(
    reader: &mut Reader<'a>,
    mut field: impl FnMut(&mut Reader<'a>, Str<'a>) -> Result<bool, ScanError>,
) -> Result<(), ScanError> {
    reader.unless_null(|r| {
        r.object_last_wins(|r, key| if field(r, key)? { Ok(()) } else { r.skip() })
    })
}

/// An item's `metadata` (absent or null: `S::default()`), read field by field into `S`: `field`
/// reads the value of a key it wants and says so with `true`. Of two `metadata` keys the last
/// counts.
pub fn metadata<'a, S: Default>(
    reader: &mut Reader<'a>,
    mut field: impl FnMut(&mut S, &mut Reader<'a>, Str<'a>) -> Result<bool, ScanError>,
) -> Result<S, ScanError> {
    let mut meta = S::default();
    reader.object_last_wins(|r, key| {
        if key.is("metadata") {
            meta = S::default();
            fields(r, |r, key| field(&mut meta, r, key))
        } else {
            r.skip()
        }
    })?;
    Ok(meta)
}

/// A map of strings that may be null (`metadata.labels`, `metadata.annotations`); of a key
/// given twice the last counts.
pub fn string_map(reader: &mut Reader) -> Result<BTreeMap<String, String>, ScanError> {
    let mut map = BTreeMap::new();
    fields(reader, |r, key| {
        let value = r.string()?.text()?.into_owned();
        map.insert(key.text()?.into_owned(), value);
        Ok(true)
    })?;
    Ok(map)
}

/// Whether a field holds anything but null (`metadata.deletionTimestamp`); its value is skipped.
pub fn present(reader: &mut Reader) -> Result<bool, ScanError> {
    if reader.null()? {
        return Ok(false);
    }
    reader.skip()?;
    Ok(true)
}

/// A string field that may be null.
pub fn optional_text<'a>(reader: &mut Reader<'a>) -> Result<Option<Cow<'a, str>>, ScanError> {
    if reader.null()? {
        return Ok(None);
    }
    reader.string()?.text().map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skips(json: &str) -> Result<(), ScanError> {
        let mut reader = Reader::new(json);
        reader.skip()?;
        reader.end()
    }

    #[test]
    fn a_key_given_twice_is_read_as_its_last_value() {
        // `a` read as a string, as serde_json reads an object into a map: last value wins.
        let read = |json: &str| {
            let mut reader = Reader::new(json);
            let mut a = None;
            reader
                .object_last_wins(|r, key| {
                    if key.is("a") {
                        a = Some(r.string()?.text()?.into_owned());
                        Ok(())
                    } else {
                        r.skip()
                    }
                })
                .map(|()| a)
                .map_err(|e| e.to_string())
        };
        assert_eq!(read(r#"{"a":0,"b":1,"a":"x"}"#), Ok(Some("x".into())));
        assert_eq!(
            read(r#"{"a":"x","a":0}"#),
            Err("expected a string at byte 13".into())
        );
        assert_eq!(
            read(r#"{"a":0}"#),
            Err("expected a string at byte 5".into())
        );
        // A value that is not JSON fails whatever follows.
        assert_eq!(
            read(r#"{"a":[1 2],"a":"x"}"#),
            Err("expected ',' or ']' at byte 8".into())
        );
    }

    #[test]
    fn accepts_what_serde_json_accepts() {
        for json in [
            r#"{"a":[1,-2.5e+3,0,true,false,null,"x\"y\\z\u00e9"],"b":{},"c":[]}"#,
            " [ { \"k\" : \"v\" } , \"\" ] ",
            r#""a long string that spans several eight byte words, with é and 日本""#,
            r#""\ud83d\ude00 and \u00e9""#,
            "1e-400",
            "-0.0e-0",
        ] {
            assert!(serde_json::from_str::<serde_json::Value>(json).is_ok());
            assert_eq!(skips(json), Ok(()), "{json}");
        }
    }

    #[test]
    fn rejects_what_serde_json_rejects() {
        for (json, what) in [
            ("{\"a\":1,}", "expected a string at byte 7"),
            ("[1 2]", "expected ',' or ']' at byte 3"),
            ("{\"a\" 1}", "expected ':' at byte 5"),
            ("\"tab\there\"", "control character in a string at byte 4"),
            ("\"bad \\x escape\"", "invalid escape at byte 5"),
            ("\"\\u12\"", "invalid unicode escape at byte 1"),
            ("\"\\ud800\"", "invalid unicode escape at byte 1"),
            ("\"\\udc00\"", "invalid unicode escape at byte 1"),
            ("\"\\ud800\\u0041\"", "invalid unicode escape at byte 1"),
            ("1e400", "invalid number at byte 0"),
            ("01", "trailing characters at byte 1"),
            ("-", "invalid number at byte 0"),
            ("1.", "invalid number at byte 0"),
            ("nul", "invalid literal at byte 0"),
            ("\"unterminated", "unterminated string at byte 13"),
            ("[]]", "trailing characters at byte 2"),
        ] {
            assert!(serde_json::from_str::<serde_json::Value>(json).is_err());
            assert_eq!(skips(json).unwrap_err().to_string(), what, "{json}");
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(
            skips(&deep).unwrap_err().to_string(),
            format!("nesting too deep at byte {}", MAX_DEPTH + 1)
        );
    }

    #[test]
    fn every_truncation_of_a_list_is_an_error() {
        let list = r#"{"apiVersion":"v1","kind":"NamespaceList","metadata":{},"items":[{"metadata":{"name":"tenant-a","labels":{"k":"v\u0041"}}},{"metadata":{"name":"b","n":-1.5e3}}]}"#;
        let names = list_items(list, |r| {
            metadata(r, |name: &mut String, r, key| {
                let wanted = key.is("name");
                if wanted {
                    *name = r.string()?.text()?.into_owned();
                }
                Ok(wanted)
            })
        })
        .unwrap();
        assert_eq!(names, ["tenant-a", "b"]);
        for cut in 0..list.len() {
            assert!(
                list_items(&list[..cut], |r| r.skip()).is_err(),
                "accepted a list cut at {cut}"
            );
        }
    }

    #[test]
    fn keys_and_values_with_escapes_decode() {
        let json = r#"{"na\u006de":"a\/b","items":null}"#;
        let mut seen = Vec::new();
        let mut reader = Reader::new(json);
        reader
            .object(|r, key| {
                if key.is("name") {
                    seen.push(r.string()?.text()?.into_owned());
                    Ok(())
                } else {
                    r.skip()
                }
            })
            .unwrap();
        assert_eq!(seen, ["a/b"]);
        assert_eq!(list_items(json, |r| r.skip()), Ok(Vec::new()));
    }
}
