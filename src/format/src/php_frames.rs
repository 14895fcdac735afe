//! PHP mode's frames as text, read the same way by the library (the
//! memory_limit and request-peak lines) and the command (`top --php`,
//! `flamegraph --php`), so that the sizes they print for one file agree.
//!
//! A stack folded to its PHP frames keeps the request frame, the PHP
//! frames and the `[zend_mm]` leaf; stacks that differ only in native
//! frames become one. The application's frames are the PHP frames that are
//! neither a function written in C (`name [internal]`) nor in a library's
//! file (`... (file.php:12) [library]`, `HEAPLIVE_PHP_LIBRARY`).

/// The mark the library puts after a frame of a library's file.
pub const LIBRARY_MARK: &str = " [library]";

/// A folded stack with no PHP frame (`top --php`).
pub const NO_PHP_CODE: &str = "[no PHP code]";

/// Is `frame` a PHP request's root frame, `[GET /api/report]` or `[cli
/// script.php]`?
pub fn is_request_frame(frame: &str) -> bool {
    let Some(inner) = frame.strip_prefix('[').and_then(|f| f.strip_suffix(']')) else {
        return false;
    };
    let Some((method, rest)) = inner.split_once(' ') else {
        return false;
    };
    !rest.is_empty()
        && (method == "cli"
            || (!method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase())))
}

/// Is `frame` one of PHP mode's frames: `f (file.php:12)` (possibly marked
/// `[library]`), `f [internal]`, `[zend_mm]`, `[php?]`, a request's `[GET
/// /path]`?
pub fn is_php_frame(frame: &str) -> bool {
    let frame = frame.strip_suffix(LIBRARY_MARK).unwrap_or(frame);
    frame.ends_with(" [internal]")
        || frame == "[zend_mm]"
        || frame == "[php?]"
        || is_request_frame(frame)
        || is_user_frame(frame)
}

/// `f (file.php:12)`: a PHP function of a file (not C: `.c`, `.h` ... files
/// are native frames with `HEAPLIVE_LINES`).
fn is_user_frame(frame: &str) -> bool {
    frame
        .rsplit_once(" (")
        .and_then(|(_, at)| at.strip_suffix(')'))
        .and_then(|at| at.rsplit_once(':'))
        .is_some_and(|(file, line)| {
            !file.is_empty()
                && !line.is_empty()
                && line.bytes().all(|b| b.is_ascii_digit())
                && ![".c", ".h", ".cc", ".cpp", ".rs"]
                    .iter()
                    .any(|x| file.ends_with(x))
        })
}

/// Is `frame` the application's: a PHP function of a file outside the
/// libraries?
pub fn is_application_frame(frame: &str) -> bool {
    !frame.ends_with(LIBRARY_MARK) && is_user_frame(frame)
}

/// The PHP frames of a stack (root first), as `top --php` keys it: its PHP
/// frames joined by `;`, or `[no PHP code]` followed by its request and
/// `[zend_mm]` frames when it has no PHP code.
pub fn php_key<'a>(frames: impl IntoIterator<Item = &'a str>) -> String {
    let kept: Vec<&str> = frames.into_iter().filter(|f| is_php_frame(f)).collect();
    if kept
        .iter()
        .all(|f| *f == "[zend_mm]" || is_request_frame(f))
    {
        let mut k = String::from(NO_PHP_CODE);
        for f in kept {
            k.push(';');
            k.push_str(f);
        }
        k
    } else {
        kept.join(";")
    }
}

/// The innermost application frame of a stack given root first.
pub fn innermost_application<'a>(frames: &[&'a str]) -> Option<&'a str> {
    frames
        .iter()
        .rev()
        .copied()
        .find(|f| is_application_frame(f))
}

/// What the PHP lines and `top --php` say about a set of stacks (root
/// first, with their bytes): the largest stack folded to its PHP frames
/// (`key`, its bytes), and the application frame holding the most as the
/// innermost application frame of its stacks (its bytes), out of `total`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PhpSummary {
    pub top_key: String,
    pub top_bytes: u64,
    pub app_frame: Option<String>,
    pub app_bytes: u64,
    pub total: u64,
}

/// Sums `stacks` (each root first, with its bytes) into a [`PhpSummary`].
pub fn summarize<'a, S>(stacks: impl IntoIterator<Item = (S, u64)>) -> PhpSummary
where
    S: IntoIterator<Item = &'a str>,
{
    use std::collections::HashMap;
    let mut by_key: HashMap<String, u64> = HashMap::new();
    let mut by_app: HashMap<String, u64> = HashMap::new();
    let mut total = 0u64;
    for (frames, bytes) in stacks {
        let frames: Vec<&str> = frames.into_iter().collect();
        total += bytes;
        *by_key.entry(php_key(frames.iter().copied())).or_insert(0) += bytes;
        if let Some(a) = innermost_application(&frames) {
            *by_app.entry(a.to_string()).or_insert(0) += bytes;
        }
    }
    // The largest; ties by name, so the answer does not depend on order.
    let pick = |m: HashMap<String, u64>| {
        m.into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
    };
    let (top_key, top_bytes) = pick(by_key).unwrap_or_default();
    let app = pick(by_app);
    PhpSummary {
        top_key,
        top_bytes,
        app_bytes: app.as_ref().map_or(0, |a| a.1),
        app_frame: app.map(|a| a.0),
        total,
    }
}

/// `a <- b <- c`: the innermost `n` frames of a `top --php` key (root
/// first, `;`-separated), innermost first, without the request frame.
pub fn innermost_text(key: &str, n: usize) -> String {
    let frames: Vec<&str> = key
        .split(';')
        .rev()
        .filter(|f| !is_request_frame(f) && *f != "[zend_mm]" && *f != NO_PHP_CODE)
        .collect();
    let more = frames.len() > n;
    let mut s = frames[..frames.len().min(n)].join(" <- ");
    if more {
        s.push_str(" <- ...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_told_apart() {
        let php: fn(&str) -> bool = is_php_frame;
        let app: fn(&str) -> bool = is_application_frame;
        for (is, frame, want) in [
            (php, "Repo::load (Repo.php:41)", true),
            (php, "Php7::doParse (Php7.php:1294) [library]", true),
            (php, "str_repeat [internal]", true),
            (php, "zend_hash_add (zend_hash.c:12)", false),
            (app, "parse_all (parse.php:24)", true),
            (app, "Php7::doParse (Php7.php:1294) [library]", false),
            (app, "str_repeat [internal]", false),
            (app, "[GET /x]", false),
        ] {
            assert_eq!(is(frame), want, "{frame}");
        }
    }

    #[test]
    fn summary_folds_native_frames_and_finds_the_application() {
        let a = "[GET /p];_start;execute_ex;{main} (index.php:3);parse_all (parse.php:24);Php7::doParse (Php7.php:1294) [library];_emalloc_56;[zend_mm]";
        let b = "[GET /p];_start;execute_ex;{main} (index.php:3);parse_all (parse.php:24);Php7::doParse (Php7.php:1294) [library];_emalloc_large;[zend_mm]";
        let c = "[GET /p];_start;execute_ex;{main} (index.php:3);render (view.php:9);str_repeat [internal];[zend_mm]";
        let s = summarize([(a, 5u64), (b, 4), (c, 7)].map(|(s, n)| (s.split(';'), n)));
        // a and b are one stack once the native frames are folded away.
        assert_eq!(s.top_bytes, 9);
        assert_eq!(
            s.top_key,
            "[GET /p];{main} (index.php:3);parse_all (parse.php:24);Php7::doParse (Php7.php:1294) [library];[zend_mm]"
        );
        assert_eq!(s.app_frame.as_deref(), Some("parse_all (parse.php:24)"));
        assert_eq!((s.app_bytes, s.total), (9, 16));
        assert_eq!(
            innermost_text(&s.top_key, 2),
            "Php7::doParse (Php7.php:1294) [library] <- parse_all (parse.php:24) <- ..."
        );
        let none = summarize([("_start;main;malloc".split(';'), 3u64)]);
        assert_eq!(none.app_frame, None);
        assert_eq!(none.top_key, "[no PHP code]");
    }
}
