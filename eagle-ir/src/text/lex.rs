//! The lexer of the IR text form: tokens with their 1-based line and column.

use crate::error::{IrError, Result};

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Val(u32),
    Func(String),
    Num(String),
    Punct(&'static str),
    /// A source location comment, `;@ file:line:column`.
    Loc(crate::ir::Loc),
}

pub(crate) struct Lexer;

/// `file:line:column` (the file may itself hold `:`).
fn parse_loc(t: &str) -> Option<crate::ir::Loc> {
    let mut it = t.rsplitn(3, ':');
    let column = it.next()?.parse().ok()?;
    let line = it.next()?.parse().ok()?;
    let file = it.next().filter(|f| !f.is_empty())?;
    Some(crate::ir::Loc {
        file: file.into(),
        line,
        column,
    })
}

impl Lexer {
    pub(crate) fn lex(src: &str) -> Result<Vec<(Tok, usize, usize)>> {
        let chars: Vec<char> = src.chars().collect();
        let (mut i, mut line, mut col) = (0usize, 1usize, 1usize);
        let mut out = vec![];
        let err = |line, column, message: String| IrError::Parse {
            line,
            column,
            message,
        };
        while i < chars.len() {
            let c = chars[i];
            let (l0, c0) = (line, col);
            let adv = |n: usize, i: &mut usize, col: &mut usize| {
                *i += n;
                *col += n;
            };
            if c == '\n' {
                i += 1;
                line += 1;
                col = 1;
                continue;
            }
            if c.is_whitespace() {
                adv(1, &mut i, &mut col);
                continue;
            }
            if c == ';' {
                // comment to end of line; `;@ file:line:column` is an op's source location
                let start = i;
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                if chars.get(start + 1) == Some(&'@') {
                    let text: String = chars[start + 2..i].iter().collect();
                    let loc = parse_loc(text.trim()).ok_or_else(|| {
                        err(
                            l0,
                            c0,
                            format!("expected a source location `;@ file:line:column`, found `;@{text}`"),
                        )
                    })?;
                    out.push((Tok::Loc(loc), l0, c0));
                }
                col += i - start;
                continue;
            }
            if c == '.' && chars.get(i + 1) == Some(&'.') {
                out.push((Tok::Punct(".."), l0, c0));
                adv(2, &mut i, &mut col);
                continue;
            }
            // `-` alone (before a space) is the operator of a derived dim, `(N - 2)`; before a
            // digit or letter it starts a number (`-2`, `-inf`).
            if c == '-' && chars.get(i + 1).is_some_and(|n| n.is_whitespace()) {
                out.push((Tok::Punct("-"), l0, c0));
                adv(1, &mut i, &mut col);
                continue;
            }
            let punct = [
                "(", ")", "{", "}", "[", "]", "<", ">", ",", ":", "=", "*", "+", "/",
            ];
            if let Some(p) = punct.iter().find(|p| p.starts_with(c)) {
                out.push((Tok::Punct(p), l0, c0));
                adv(1, &mut i, &mut col);
                continue;
            }
            if c == '%' || c == '@' {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                    if c == '%' && !chars[j].is_ascii_digit() {
                        break;
                    }
                    j += 1;
                }
                let s: String = chars[start..j].iter().collect();
                if s.is_empty() {
                    return Err(err(l0, c0, format!("expected a name after `{c}`")));
                }
                let tok =
                    if c == '%' {
                        Tok::Val(s.parse().map_err(|_| {
                            err(l0, c0, format!("value number `%{s}` is too large"))
                        })?)
                    } else {
                        Tok::Func(s)
                    };
                out.push((tok, l0, c0));
                adv(j - i, &mut i, &mut col);
                continue;
            }
            if c.is_ascii_digit()
                || (c == '-' && i + 1 < chars.len() && (chars[i + 1].is_ascii_alphanumeric()))
            {
                let mut j = i + 1;
                while j < chars.len() {
                    let d = chars[j];
                    let ok = d.is_ascii_alphanumeric()
                        || (d == '.' && chars.get(j + 1) != Some(&'.'))
                        || ((d == '-' || d == '+') && matches!(chars[j - 1], 'e' | 'E'));
                    if !ok {
                        break;
                    }
                    j += 1;
                }
                out.push((Tok::Num(chars[i..j].iter().collect()), l0, c0));
                adv(j - i, &mut i, &mut col);
                continue;
            }
            if c.is_alphabetic() || c == '_' {
                let mut j = i;
                while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                    j += 1;
                }
                out.push((Tok::Ident(chars[i..j].iter().collect()), l0, c0));
                adv(j - i, &mut i, &mut col);
                continue;
            }
            return Err(err(l0, c0, format!("unexpected character `{c}`")));
        }
        Ok(out)
    }
}
