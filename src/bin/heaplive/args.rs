//! Hand-rolled argument parsing shared by the subcommands: `--opt VALUE`,
//! `--opt=VALUE`, `-n VALUE`, `-nVALUE`, and `--` to end the options.

use crate::{Res, usage};
use std::collections::VecDeque;
use std::ffi::OsString;

pub enum Item {
    /// An option as written (`--every`, `-n`), with a value given inline
    /// (`--every=5m`, `-n5`) if any.
    Opt(String, Option<String>),
    Pos(OsString),
    /// `--`: everything after it is positional.
    DashDash,
}

pub struct Args {
    items: VecDeque<OsString>,
}

impl Args {
    pub fn new(items: Vec<OsString>) -> Args {
        Args {
            items: items.into(),
        }
    }

    pub fn next(&mut self) -> Res<Option<Item>> {
        let Some(arg) = self.items.pop_front() else {
            return Ok(None);
        };
        let Some(s) = arg.to_str() else {
            return Ok(Some(Item::Pos(arg)));
        };
        if s == "--" {
            return Ok(Some(Item::DashDash));
        }
        if let Some(long) = s.strip_prefix("--") {
            return Ok(Some(match long.split_once('=') {
                Some((name, value)) => Item::Opt(format!("--{name}"), Some(value.to_string())),
                None => Item::Opt(s.to_string(), None),
            }));
        }
        if s.len() >= 2 && s.starts_with('-') && s.is_char_boundary(2) {
            let (name, value) = s.split_at(2);
            let value = (!value.is_empty()).then(|| value.to_string());
            return Ok(Some(Item::Opt(name.to_string(), value)));
        }
        Ok(Some(Item::Pos(arg)))
    }

    /// The value of option `name`: the inline one, else the next argument.
    pub fn value(&mut self, name: &str, inline: Option<String>) -> Res<String> {
        if let Some(v) = inline {
            return Ok(v);
        }
        match self.items.pop_front() {
            None => usage(format!("option {name} needs a value")),
            Some(v) => match v.into_string() {
                Ok(v) => Ok(v),
                Err(_) => usage(format!("the value of {name} is not valid UTF-8")),
            },
        }
    }

    /// Everything not consumed yet, unparsed (the command of `run`).
    pub fn rest(&mut self) -> Vec<OsString> {
        self.items.drain(..).collect()
    }
}

/// Rejects a value given to a flag that takes none (`--inclusive=yes`).
pub fn no_value(name: &str, inline: &Option<String>) -> Res<()> {
    match inline {
        Some(_) => usage(format!("option {name} takes no value")),
        None => Ok(()),
    }
}

pub fn unknown<T>(name: &str) -> Res<T> {
    usage(format!("unknown option '{name}'"))
}

/// A positional argument as a path string (file names must be UTF-8 here
/// because they appear in messages and titles).
pub fn pos_string(arg: OsString) -> Res<String> {
    arg.into_string()
        .or_else(|a| usage(format!("argument {a:?} is not valid UTF-8")))
}

pub fn parse_count(name: &str, value: &str) -> Res<usize> {
    match value.parse::<usize>() {
        Ok(n) => Ok(n),
        Err(_) => usage(format!(
            "{name} wants a non-negative integer, not '{value}'"
        )),
    }
}
