//! The little JSON `heaplive report` embeds: built as a tree, written once
//! into the page's `<script type="application/json">` element.

/// A JSON value. Objects keep their keys in insertion order.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    pub fn obj() -> Json {
        Json::Obj(Vec::new())
    }

    pub fn str(s: &str) -> Json {
        Json::Str(s.to_string())
    }

    pub fn num(x: f64) -> Json {
        Json::Num(x)
    }

    /// The object with `key` set to `v` (appended).
    pub fn with(self, key: &str, v: Json) -> Json {
        match self {
            Json::Obj(mut m) => {
                m.push((key.to_string(), v));
                Json::Obj(m)
            }
            other => other,
        }
    }

    pub fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Num(x) if x.is_finite() => {
                if x.fract() == 0.0 && x.abs() < 9.0e15 {
                    out.push_str(&format!("{}", *x as i64));
                } else {
                    out.push_str(&format!("{x}"));
                }
            }
            Json::Num(_) => out.push_str("null"),
            Json::Str(s) => write_str(s, out),
            Json::Arr(v) => {
                out.push('[');
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    x.write(out);
                }
                out.push(']');
            }
            Json::Obj(m) => {
                out.push('{');
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(k, out);
                    out.push(':');
                    x.write(out);
                }
                out.push('}');
            }
        }
    }

    /// The text for inside a `<script>` element: `<` is written `\u003c`
    /// (it occurs only inside strings), so no `</script>` or `<!--` in the
    /// data ends or changes the element.
    pub fn to_script_text(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s.replace('<', "\\u003c")
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Text for HTML (the page's title).
pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_escapes() {
        let j = Json::obj().with("a", Json::num(3.0)).with(
            "b",
            Json::Arr(vec![
                Json::Null,
                Json::num(0.5),
                Json::str("x\"</script>\n"),
            ]),
        );
        assert_eq!(
            j.to_script_text(),
            r#"{"a":3,"b":[null,0.5,"x\"\u003c/script>\n"]}"#
        );
        assert_eq!(html_escape("<a&b>"), "&lt;a&amp;b&gt;");
    }
}
