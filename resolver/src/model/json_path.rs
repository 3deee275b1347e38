//! Where in a JSON text a decoding error lies, as a path (`definitions.Postgres.cardinality.max`,
//! `platformUsers[2]`). serde_json reports an error's byte position, not its path; walking the
//! text to that position costs nothing until a decode fails, where tracking the path during every
//! decode (serde_path_to_error) doubled the module's deserialisers.

/// The path of what `err`, from decoding `text`, is about.
pub fn path_of(text: &str, err: &serde_json::Error) -> String {
    let mut at = offset_of(text, err.line(), err.column());
    // A syntax error points one past the byte it peeked at (a value's first, where the value
    // cannot start); a data error points where the decoder stood.
    if matches!(
        err.classify(),
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof
    ) {
        at = at.saturating_sub(1);
    }
    // An unknown field is named in its path; an unknown variant (an enum written as an object
    // of one key) is not.
    let key_named = err.to_string().starts_with("unknown field");
    path_at(text, at, key_named)
}

/// The path of what the error at byte `at` of `text` is about, in serde_path_to_error's notation
/// (`.` for the whole text): the value starting at `at` (one the decoder did not expect), else
/// the key or value ending there (a scalar it refused, an unknown key, a container missing a
/// field), else the innermost place the text is open at (a syntax error).
fn path_at(text: &str, at: usize, key_named: bool) -> String {
    let mut walk = Walk {
        bytes: text.as_bytes(),
        pos: 0,
        at,
        key_named,
        path: Vec::new(),
    };
    match walk.value() {
        Err(Found(path)) => path,
        Ok(()) => render(&[]),
    }
}

/// The byte offset serde_json's `line` and `column` name (the column counts bytes).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start = match line {
        0 | 1 => 0,
        _ => text
            .match_indices('\n')
            .nth(line - 2)
            .map_or(text.len(), |(i, _)| i + 1),
    };
    (start + column).min(text.len())
}

enum Segment {
    Key(String),
    Index(usize),
}

/// The walk ends with the path it found.
struct Found(String);

struct Walk<'t> {
    bytes: &'t [u8],
    pos: usize,
    at: usize,
    key_named: bool,
    path: Vec<Segment>,
}

fn render(path: &[Segment]) -> String {
    if path.is_empty() {
        return ".".to_owned();
    }
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Index(index) => {
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
        }
    }
    out
}

impl Walk<'_> {
    fn found(&self) -> Found {
        Found(render(&self.path))
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// Past the end of the error's position with nothing found: the text is open here.
    fn check_passed(&self) -> Result<(), Found> {
        if self.pos > self.at {
            return Err(self.found());
        }
        Ok(())
    }

    fn value(&mut self) -> Result<(), Found> {
        self.skip_whitespace();
        self.check_passed()?;
        let start = self.pos;
        match self.peek() {
            Some(_) if start == self.at => return Err(self.found()),
            Some(b'{') => self.object()?,
            Some(b'[') => self.array()?,
            Some(b'"') => {
                self.string()?;
            }
            Some(_) => self.scalar(),
            None => return Err(self.found()),
        }
        if self.pos == self.at {
            return Err(self.found());
        }
        self.check_passed()
    }

    fn scalar(&mut self) {
        while let Some(b) = self.peek() {
            if matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r' | b'"') {
                break;
            }
            self.pos += 1;
        }
    }

    /// A string's text as written (escapes decoded for a key's name).
    fn string(&mut self) -> Result<&str, Found> {
        let start = self.pos;
        self.pos += 1;
        loop {
            match self.peek() {
                Some(b'"') => break,
                Some(b'\\') => self.pos += 2,
                Some(_) => self.pos += 1,
                None => return Err(self.found()),
            }
        }
        self.pos += 1;
        let raw = &self.bytes[start..self.pos];
        std::str::from_utf8(raw).map_err(|_| self.found())
    }

    /// Steps into a container at its opening byte; `true` when it is empty (and stepped past).
    fn open(&mut self, close: u8) -> bool {
        self.pos += 1;
        self.skip_whitespace();
        let empty = self.peek() == Some(close);
        if empty {
            self.pos += 1;
        }
        empty
    }

    /// After a member: `true` at the container's end (stepped past), `false` after a comma.
    fn after_member(&mut self, close: u8) -> Result<bool, Found> {
        self.skip_whitespace();
        match self.peek() {
            Some(b',') => {
                self.pos += 1;
                Ok(false)
            }
            Some(b) if b == close => {
                self.pos += 1;
                Ok(true)
            }
            _ => Err(self.found()),
        }
    }

    fn object(&mut self) -> Result<(), Found> {
        if self.open(b'}') {
            return Ok(());
        }
        loop {
            self.skip_whitespace();
            self.check_passed()?;
            if self.peek() != Some(b'"') {
                return Err(self.found());
            }
            let raw = self.string()?;
            let key = serde_json::from_str::<String>(raw).unwrap_or_else(|_| raw.to_owned());
            // serde_json refuses an unknown key after the space that follows it.
            let key_end = self.pos;
            self.skip_whitespace();
            let at_key = (key_end..=self.pos).contains(&self.at);
            if at_key && !self.key_named {
                return Err(self.found());
            }
            self.path.push(Segment::Key(key));
            if at_key || self.peek() != Some(b':') {
                return Err(self.found());
            }
            self.pos += 1;
            self.value()?;
            self.path.pop();
            if self.after_member(b'}')? {
                return Ok(());
            }
        }
    }

    fn array(&mut self) -> Result<(), Found> {
        if self.open(b']') {
            return Ok(());
        }
        for index in 0.. {
            self.path.push(Segment::Index(index));
            self.value()?;
            self.path.pop();
            if self.after_member(b']')? {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syntax_error_names_where_the_text_is_open() {
        let text = r#"{"platformUsers": ["a", tru]}"#;
        let err = serde_json::from_str::<serde_json::Value>(text).unwrap_err();
        assert_eq!(path_of(text, &err), "platformUsers[1]");
    }

    #[test]
    fn an_offset_counts_lines_and_bytes() {
        let text = "{\n  \"é\": 1,\n  \"b\": x}";
        assert_eq!(offset_of(text, 1, 0), 0);
        assert_eq!(offset_of(text, 2, 5), 7);
        assert_eq!(&text[offset_of(text, 3, 7)..], "x}");
        assert_eq!(offset_of(text, 9, 0), text.len());
    }
}
