//! The text format of an op, as its declaration in `op_kinds!` states it, and the one
//! interpreter of formats that both the printer ([`crate::print_module`]) and the parser
//! ([`crate::parse_module`]) run. No op is spelled anywhere else.
//!
//! A format is the op's line as it is printed, with `$field` where a field goes:
//! `"load $src[$offsets]"`, `"for $var in $lo..$hi $body"`, `"$f0 $f1, $f2"` (a binary op, whose
//! keyword is its `BinOp`). How a field is written follows its kind:
//! - `val`, `def`: the value's name `%N`;
//! - `vals`: the names separated by `, ` (nothing when the list is empty);
//! - `block`: `{`, the ops one level deeper, `}`;
//! - `attr(T)`: what `T`'s [`Attr`] writes (a keyword, a constant, `@callee`).
//!
//! Everything else is written as it stands; the parser reads it as tokens (words and
//! punctuation; spaces separate words and are otherwise free). A `?` makes the rest of the
//! format optional: the printer leaves it out when every field in it is empty (an empty block
//! or list), and the parser reads it only when its first word comes next (`if`'s
//! `"? else $else_body"`).
//!
//! The op's keyword is the format's first word, or its first field's keyword when the format
//! starts with an attribute (a binary op, a tile op, a math-library call): [`Attr::heads`].
//!
//! This layer names no token type and no error type of the text module: a [`Reader`] and a
//! [`Writer`] are what the parser and the printer give it.

use super::TileOp;
use super::{
    AllreduceMode, BinOp, Block, CmpOp, Const, MathFn, NotifyOp, ReduceOp, Trap, UnOp, Value,
};
use crate::types::Dim;

/// A failed read: the [`Reader`] has recorded the error (its place and message) and the read
/// stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed;

/// What a read returns.
pub type ReadResult<T> = Result<T, Failed>;

/// The parser, as a format reads it: one token at a time.
pub trait Reader {
    /// The next token when it is a word (an identifier), consumed.
    fn word(&mut self) -> ReadResult<String>;
    /// Whether the next token is the word `w` (not consumed).
    fn is_word(&self, w: &str) -> bool;
    /// Consumes the word `w` or fails naming what was found.
    fn expect_word(&mut self, w: &str) -> ReadResult<()>;
    /// Whether the next token is the punctuation `p` (not consumed).
    fn is_punct(&self, p: &str) -> bool;
    /// Consumes the punctuation `p` or fails naming what was found.
    fn expect_punct(&mut self, p: &str) -> ReadResult<()>;
    /// A number's text, consumed.
    fn num(&mut self) -> ReadResult<String>;
    /// A defined value `%N`, consumed.
    fn val(&mut self) -> ReadResult<Value>;
    /// Whether the next token is a value name `%N`.
    fn is_val(&self) -> bool;
    /// Whether the next two tokens are `,` and a value name (a list goes on).
    fn comma_then_val(&self) -> bool;
    /// A value `%N` the op defines (an `index`), in scope in the op's blocks only.
    fn def(&mut self) -> ReadResult<Value>;
    /// A block `{ ... }`.
    fn block(&mut self) -> ReadResult<Block>;
    /// A function name `@name`, without the `@`.
    fn func(&mut self) -> ReadResult<String>;
    /// A dimension (`N`, `4`, `(N / 2)`).
    fn dim(&mut self) -> ReadResult<Dim>;
    /// A constant's text (its dtype comes from the result type the op's line ends with).
    fn constant(&mut self) -> ReadResult<Const>;
    /// Records an error at the token `back` tokens before the next one, and fails.
    fn fail(&mut self, back: usize, message: String) -> Failed;
}

/// The printer, as a format writes it.
pub trait Writer {
    /// The text written so far (literal text and attributes go here).
    fn out(&mut self) -> &mut String;
    /// Writes a value's name `%N`.
    fn val(&mut self, v: Value);
    /// Writes a block: `{`, its ops one level deeper, `}`.
    fn block(&mut self, b: &Block);
}

/// An attribute field's text: an op enumeration's keyword, a constant, a dimension, a callee.
pub trait Attr {
    /// Writes the attribute.
    fn write(&self, out: &mut String);
    /// Reads it back.
    fn read(r: &mut dyn Reader) -> ReadResult<Self>
    where
        Self: Sized;
    /// The keyword this attribute gives an op whose format starts with it (`add`).
    fn keyword(&self) -> Option<&'static str> {
        None
    }
    /// Whether the keyword `word` names an op whose format starts with this attribute (`add`
    /// for a `BinOp`); `false` for attributes that never start a format.
    fn heads(word: &str) -> bool
    where
        Self: Sized,
    {
        let _ = word;
        false
    }
}

/// One field of an op, as the printer sees it.
pub enum FieldRef<'a> {
    /// A value operand.
    Val(Value),
    /// A list of value operands.
    Vals(&'a [Value]),
    /// A value the op defines.
    Def(Value),
    /// A nested block.
    Block(&'a Block),
    /// Anything else.
    Attr(&'a dyn Attr),
}

impl FieldRef<'_> {
    /// An empty list or block: what an optional tail leaves out.
    fn is_empty(&self) -> bool {
        match self {
            FieldRef::Vals(v) => v.is_empty(),
            FieldRef::Block(b) => b.ops.is_empty(),
            FieldRef::Val(_) | FieldRef::Def(_) | FieldRef::Attr(_) => false,
        }
    }
}

/// A piece of a format.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Piece<'f> {
    /// Text written as it stands.
    Text(&'f str),
    /// The field at this index of the declaration.
    Field(usize),
    /// The rest is optional.
    Optional,
}

/// The pieces of `format`, fields resolved against `names` (the declaration's bindings).
fn pieces<'f>(format: &'f str, names: &'f [&'f str]) -> impl Iterator<Item = Piece<'f>> + Clone {
    let mut rest = format;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if let Some(r) = rest.strip_prefix('?') {
            rest = r;
            return Some(Piece::Optional);
        }
        if let Some(r) = rest.strip_prefix('$') {
            let end = r
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(r.len());
            let (name, r) = r.split_at(end);
            rest = r;
            let i = names.iter().position(|n| *n == name);
            // `format_names_every_field_once` (below) holds every declaration to its fields.
            return Some(Piece::Field(i.unwrap_or(usize::MAX)));
        }
        let end = rest.find(['$', '?']).unwrap_or(rest.len());
        let (text, r) = rest.split_at(end);
        rest = r;
        Some(Piece::Text(text))
    })
}

/// The tokens of a format's literal text: words and punctuation (`..` is one).
fn tokens(text: &str) -> impl Iterator<Item = (&str, bool)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        rest = rest.trim_start();
        let c = rest.chars().next()?;
        let len = if c.is_ascii_alphanumeric() || c == '_' {
            rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len())
        } else if rest.starts_with("..") {
            2
        } else {
            c.len_utf8()
        };
        let (t, r) = rest.split_at(len);
        rest = r;
        Some((t, c.is_ascii_alphanumeric() || c == '_'))
    })
}

/// Writes an op's fields by its format (the op's line up to its result type).
pub fn write(format: &str, names: &[&str], fields: &[FieldRef<'_>], w: &mut dyn Writer) {
    let mut it = pieces(format, names);
    while let Some(p) = it.next() {
        match p {
            Piece::Text(t) => w.out().push_str(t),
            Piece::Field(i) => match &fields[i] {
                FieldRef::Val(v) | FieldRef::Def(v) => w.val(*v),
                FieldRef::Vals(vs) => {
                    for (k, v) in vs.iter().enumerate() {
                        if k > 0 {
                            w.out().push_str(", ");
                        }
                        w.val(*v);
                    }
                }
                FieldRef::Block(b) => w.block(b),
                FieldRef::Attr(a) => a.write(w.out()),
            },
            Piece::Optional => {
                let all_empty = it.clone().all(|p| match p {
                    Piece::Field(i) => fields[i].is_empty(),
                    Piece::Text(_) | Piece::Optional => true,
                });
                if all_empty {
                    return;
                }
            }
        }
    }
}

/// The format's leading word (`"load"` of `"load $src[$offsets]"`), or `""` when it starts with
/// a field; computed at compile time, so an op's keyword costs no parsing.
pub const fn leading_word(format: &'static str) -> &'static str {
    let b = format.as_bytes();
    let mut n = 0;
    while n < b.len() && (b[n].is_ascii_alphanumeric() || b[n] == b'_') {
        n += 1;
    }
    format.split_at(n).0
}

/// A field's [`Attr::heads`], for an attribute field.
pub type Heads = fn(&str) -> bool;

/// The keyword of an op with this format and these fields: the format's first word, or its
/// first field's keyword ([`Attr::keyword`]).
pub fn keyword(
    format: &'static str,
    names: &'static [&'static str],
    fields: &[FieldRef<'_>],
) -> &'static str {
    match pieces(format, names).next() {
        Some(Piece::Text(t)) => tokens(t).next().map_or("", |(t, _)| t),
        Some(Piece::Field(i)) => match fields.get(i) {
            Some(FieldRef::Attr(a)) => a.keyword().unwrap_or(""),
            _ => "",
        },
        Some(Piece::Optional) | None => "",
    }
}

/// Whether the keyword `word` names the op of this format: its first word, or the keyword of
/// its first field (`heads[i]`, the field's [`Attr::heads`]).
pub fn heads(format: &str, names: &[&str], word: &str, field_heads: &[Option<Heads>]) -> bool {
    match pieces(format, names).next() {
        Some(Piece::Text(t)) => tokens(t).next().is_some_and(|(t, _)| t == word),
        Some(Piece::Field(i)) => field_heads
            .get(i)
            .copied()
            .flatten()
            .is_some_and(|h| h(word)),
        Some(Piece::Optional) | None => false,
    }
}

/// How a field is read: `read_field(i, reader)` reads field `i` and keeps it.
pub type ReadField<'a> = dyn FnMut(usize, &mut dyn Reader) -> ReadResult<()> + 'a;

/// Reads an op's fields by its format, from its keyword on (the keyword not yet consumed).
/// `read_field` reads field `i` by its kind. Fields of an optional tail that is absent are not
/// read.
pub fn read(
    format: &str,
    names: &[&str],
    r: &mut dyn Reader,
    read_field: &mut ReadField<'_>,
) -> ReadResult<()> {
    let mut it = pieces(format, names).peekable();
    while let Some(p) = it.next() {
        match p {
            Piece::Text(t) => {
                for (tok, is_word) in tokens(t) {
                    if is_word {
                        r.expect_word(tok)?;
                    } else {
                        r.expect_punct(tok)?;
                    }
                }
            }
            Piece::Field(i) => read_field(i, r)?,
            Piece::Optional => {
                let first = match it.peek() {
                    Some(Piece::Text(t)) => tokens(t).next(),
                    _ => None,
                };
                let present = match first {
                    Some((tok, true)) => r.is_word(tok),
                    Some((tok, false)) => r.is_punct(tok),
                    None => true,
                };
                if !present {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// Reads a list of values: none, or `%a` followed by `, %b` while a comma and a value come
/// next (so a list may end an op's line or stand before a closing bracket).
pub fn read_vals(r: &mut dyn Reader) -> ReadResult<Vec<Value>> {
    let mut vs = vec![];
    if !r.is_val() {
        return Ok(vs);
    }
    vs.push(r.val()?);
    while r.comma_then_val() {
        r.expect_punct(",")?;
        vs.push(r.val()?);
    }
    Ok(vs)
}

/// Reads one enumeration keyword, with the message a wrong word gets.
fn read_keyword<T>(
    r: &mut dyn Reader,
    what: &str,
    from_name: fn(&str) -> Option<T>,
    all: &[&str],
) -> ReadResult<T> {
    let w = r.word()?;
    from_name(&w).ok_or_else(|| {
        r.fail(
            1,
            format!(
                "unknown {what} `{w}`; expected {}",
                crate::spec::one_of(all.iter().copied())
            ),
        )
    })
}

/// `Attr` for an enumeration declared with `enumeration!`: its keyword; `heads` when its
/// keyword names the op (the op's format starts with it).
macro_rules! keyword_attr {
    ($($t:ty => $what:literal, heads: $heads:literal;)*) => {$(
        impl Attr for $t {
            fn write(&self, out: &mut String) {
                out.push_str(self.name());
            }
            fn keyword(&self) -> Option<&'static str> {
                Some(self.name())
            }
            fn read(r: &mut dyn Reader) -> ReadResult<Self> {
                read_keyword(r, $what, <$t>::from_name, &<$t>::ALL.map(<$t>::name))
            }
            fn heads(word: &str) -> bool {
                $heads && <$t>::from_name(word).is_some()
            }
        }
    )*};
}

keyword_attr! {
    BinOp => "binary op", heads: true;
    UnOp => "unary op", heads: true;
    CmpOp => "comparison", heads: false;
    ReduceOp => "reduce op", heads: false;
    AllreduceMode => "allreduce mode", heads: false;
    NotifyOp => "notify op", heads: false;
    Trap => "trap kind", heads: false;
}

impl Attr for MathFn {
    fn write(&self, out: &mut String) {
        out.push_str(self.name());
    }
    fn keyword(&self) -> Option<&'static str> {
        Some(self.name())
    }
    fn read(r: &mut dyn Reader) -> ReadResult<Self> {
        read_keyword(
            r,
            "math function",
            MathFn::from_name,
            &MathFn::ALL.map(MathFn::name),
        )
    }
    fn heads(word: &str) -> bool {
        MathFn::from_name(word).is_some()
    }
}

/// A tile op: its keyword, and `extract`'s constant offsets (`extract[0, 16]`).
impl Attr for TileOp {
    fn write(&self, out: &mut String) {
        out.push_str(self.name());
        if let TileOp::Extract(offs) = self {
            out.push('[');
            for (k, o) in offs.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                out.push_str(&o.to_string());
            }
            out.push(']');
        }
    }
    fn keyword(&self) -> Option<&'static str> {
        Some(self.name())
    }
    fn read(r: &mut dyn Reader) -> ReadResult<Self> {
        let w = r.word()?;
        let Some(mut t) = TileOp::from_name(&w) else {
            return Err(r.fail(1, format!("unknown tile op `{w}`")));
        };
        if let TileOp::Extract(offs) = &mut t {
            r.expect_punct("[")?;
            while !r.is_punct("]") {
                if !offs.is_empty() {
                    r.expect_punct(",")?;
                }
                let n = r.num()?;
                let x = n
                    .parse::<u64>()
                    .map_err(|_| r.fail(1, format!("expected a constant offset, found `{n}`")))?;
                offs.push(x);
            }
            r.expect_punct("]")?;
        }
        Ok(t)
    }
    fn heads(word: &str) -> bool {
        TileOp::from_name(word).is_some()
    }
}

/// A constant: `true`, an integer, a float (`{:?}`, the shortest text with the same bits), a
/// NaN with its bits (`nan(0x7fc00000)`).
impl Attr for Const {
    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut dyn Reader) -> ReadResult<Self> {
        r.constant()
    }
}

/// A dimension: `N`, `4`, a derived dim `(N / 2)`.
impl Attr for Dim {
    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut dyn Reader) -> ReadResult<Self> {
        r.dim()
    }
}

/// A count (a loop's turn cap): its decimal digits.
impl Attr for u64 {
    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(out, "{self}");
    }
    fn read(r: &mut dyn Reader) -> ReadResult<Self> {
        let n = r.num()?;
        n.parse::<u64>()
            .map_err(|_| r.fail(1, format!("expected a count, found `{n}`")))
    }
}

/// A callee: `@name`.
impl Attr for String {
    fn write(&self, out: &mut String) {
        out.push('@');
        out.push_str(self);
    }
    fn read(r: &mut dyn Reader) -> ReadResult<Self> {
        r.func()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_splits_into_text_fields_and_an_optional_tail() {
        let names = ["cond", "then_body", "else_body"];
        let p: Vec<Piece> = pieces("if $cond $then_body? else $else_body", &names).collect();
        assert_eq!(
            p,
            [
                Piece::Text("if "),
                Piece::Field(0),
                Piece::Text(" "),
                Piece::Field(1),
                Piece::Optional,
                Piece::Text(" else "),
                Piece::Field(2),
            ]
        );
        let t: Vec<_> = tokens("..] device (").collect();
        assert_eq!(
            t,
            [("..", false), ("]", false), ("device", true), ("(", false)]
        );
    }

    #[test]
    fn every_keyword_names_one_kind() {
        let mut words: Vec<&str> = crate::OpKind::FORMATS
            .iter()
            .filter_map(|(_, f, _)| tokens(f).next().filter(|t| t.1).map(|t| t.0))
            .collect();
        words.extend(BinOp::ALL.map(BinOp::name));
        words.extend(UnOp::ALL.map(UnOp::name));
        words.extend(MathFn::ALL.map(MathFn::name));
        words.extend(TileOp::keyword_ops().iter().map(TileOp::name));
        words.push("extract");
        for w in &words {
            let kinds = crate::OpKind::kinds_headed_by(w);
            assert_eq!(kinds.len(), 1, "`{w}` names {kinds:?}");
        }
        assert!(crate::OpKind::kinds_headed_by("frobnicate").is_empty());
        assert_eq!(crate::OpKind::kinds_headed_by("add"), ["Binary"]);
        assert_eq!(crate::OpKind::kinds_headed_by("row_sum"), ["Tile"]);
    }

    #[test]
    fn format_names_every_field_once() {
        for (name, format, fields) in crate::OpKind::FORMATS {
            let mut seen = vec![0; fields.len()];
            for p in pieces(format, fields) {
                if let Piece::Field(i) = p {
                    assert!(i < fields.len(), "`{name}`: `{format}` names no field");
                    seen[i] += 1;
                }
            }
            assert!(
                seen.iter().all(|n| *n == 1),
                "`{name}`: `{format}` must name each of {fields:?} once"
            );
        }
    }
}
