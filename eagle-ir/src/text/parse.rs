//! Parser for the IR text form written by [`crate::print_module`].

use crate::error::{IrError, Result};
use crate::ir::form::{Failed, ReadResult, Reader};
use crate::ir::{Block, Function, Level, Module, Op, OpKind, Param, Value};
use crate::types::{DType, Dim, Shape, Type};
use std::borrow::Cow;
use std::collections::HashMap;

use super::lex::{Lexer, Tok};

struct Parser {
    toks: Vec<(Tok, usize, usize)>,
    pos: usize,
    vals: HashMap<u32, Value>,
    types: crate::entity::PrimaryMap<Value, Type>,
    /// The op arena of the function being read.
    arena: crate::ir::Ops,
    /// The error a failed format read recorded ([`Reader`]).
    failure: Option<IrError>,
    /// A float constant's text, read in the result's dtype once the type is known.
    float_text: Option<String>,
    /// Values the op being read defines, in scope from its first block on.
    pending_defs: Vec<(u32, Value)>,
    /// The location after the first `{` of the op being read: `None` before its first block.
    block_loc: Option<Option<crate::ir::Loc>>,
}

fn describe(t: Option<&Tok>) -> String {
    match t {
        None => "end of input".into(),
        Some(Tok::Ident(s)) => format!("`{s}`"),
        Some(Tok::Val(n)) => format!("`%{n}`"),
        Some(Tok::Func(s)) => format!("`@{s}`"),
        Some(Tok::Num(s)) => format!("`{s}`"),
        Some(Tok::Punct(p)) => format!("`{p}`"),
        Some(Tok::Loc(l)) => format!("the source location `;@ {l}` (it may only end an op's line)"),
    }
}

impl Parser {
    fn err<T>(&self, message: impl Into<String>) -> Result<T> {
        Err(self.error(message))
    }
    /// A parse error at the next token.
    fn error(&self, message: impl Into<String>) -> IrError {
        let (line, column) = self
            .toks
            .get(self.pos)
            .or(self.toks.last())
            .map(|t| (t.1, t.2))
            .unwrap_or((1, 1));
        IrError::Parse {
            line,
            column,
            message: message.into(),
        }
    }
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t
    }
    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Tok::Punct(q)) if *q == p)
    }
    fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(q)) if q == s)
    }
    fn expect_punct(&mut self, p: &str) -> Result<()> {
        if self.is_punct(p) {
            self.pos += 1;
            Ok(())
        } else {
            self.err(format!("expected `{p}`, found {}", describe(self.peek())))
        }
    }
    fn expect_ident(&mut self, s: &str) -> Result<()> {
        if self.is_ident(s) {
            self.pos += 1;
            Ok(())
        } else {
            self.err(format!("expected `{s}`, found {}", describe(self.peek())))
        }
    }
    fn ident(&mut self) -> Result<String> {
        match self.peek().cloned() {
            Some(Tok::Ident(s)) => {
                self.pos += 1;
                Ok(s)
            }
            t => self.err(format!("expected a name, found {}", describe(t.as_ref()))),
        }
    }
    fn num(&mut self) -> Result<String> {
        match self.peek().cloned() {
            Some(Tok::Num(s)) => {
                self.pos += 1;
                Ok(s)
            }
            t => self.err(format!("expected a number, found {}", describe(t.as_ref()))),
        }
    }

    fn dtype(&mut self) -> Result<DType> {
        let s = self.ident()?;
        match DType::from_name(&s) {
            Some(d) => Ok(d),
            None => {
                self.pos -= 1;
                self.err(format!(
                    "unknown dtype `{s}`; expected one of bool, i32, i64, u32, u64, f32, f64, index"
                ))
            }
        }
    }

    fn shape(&mut self) -> Result<Shape> {
        self.expect_punct("[")?;
        let mut dims = vec![];
        while !self.is_punct("]") {
            if !dims.is_empty() {
                self.expect_punct(",")?;
            }
            dims.push(self.dim()?);
        }
        self.expect_punct("]")?;
        Ok(Shape(dims))
    }

    /// An extent: an integer, a symbol, or a derived dim `(a op b)` (op `+ - * /`).
    fn dim(&mut self) -> Result<Dim> {
        match self.next() {
            Some(Tok::Num(n)) => match n.parse::<u64>() {
                Ok(v) => Ok(Dim::Const(v)),
                Err(_) => {
                    self.pos -= 1;
                    self.err(format!("expected an extent, found `{n}`"))
                }
            },
            Some(Tok::Ident(s)) => Ok(Dim::Sym(Cow::Owned(s))),
            Some(Tok::Punct("(")) => {
                let lhs = self.dim()?;
                let op = match self.next() {
                    Some(Tok::Punct("+")) => crate::types::DimOp::Add,
                    Some(Tok::Punct("-")) => crate::types::DimOp::Sub,
                    Some(Tok::Punct("*")) => crate::types::DimOp::Mul,
                    Some(Tok::Punct("/")) => crate::types::DimOp::Div,
                    t => {
                        self.pos -= 1;
                        return self.err(format!(
                            "expected `+`, `-`, `*` or `/` in a derived dim, found {}",
                            describe(t.as_ref())
                        ));
                    }
                };
                let rhs = self.dim()?;
                self.expect_punct(")")?;
                Ok(Dim::Expr(std::sync::Arc::new(crate::types::DimExpr {
                    op,
                    lhs,
                    rhs,
                })))
            }
            t => {
                self.pos -= 1;
                self.err(format!(
                    "expected an extent, found {}",
                    describe(t.as_ref())
                ))
            }
        }
    }

    fn ty(&mut self) -> Result<Type> {
        let s = self.ident()?;
        let shaped = |p: &mut Parser| -> Result<(Shape, DType)> {
            p.expect_punct("<")?;
            let sh = p.shape()?;
            p.expect_punct(",")?;
            let d = p.dtype()?;
            p.expect_punct(">")?;
            Ok((sh, d))
        };
        Ok(match s.as_str() {
            "ctx" => Type::Ctx,
            "tensor" => {
                let (s, d) = shaped(self)?;
                Type::Tensor(s, d)
            }
            "tile" => {
                let (s, d) = shaped(self)?;
                Type::Tile(s, d)
            }
            "window" => {
                let (s, d) = shaped(self)?;
                Type::Window(s, d)
            }
            "winbuf" => {
                let (s, d) = shaped(self)?;
                Type::WinBuf(s, d)
            }
            "ref" => {
                self.expect_punct("<")?;
                let t = self.ty()?;
                self.expect_punct(">")?;
                Type::Ref(Box::new(t))
            }
            other => match DType::from_name(other) {
                Some(d) => Type::Scalar(d),
                None => {
                    self.pos -= 1;
                    return self.err(format!("unknown type `{other}`"));
                }
            },
        })
    }

    fn define(&mut self, n: u32, ty: Type) -> Result<Value> {
        if self.vals.contains_key(&n) {
            self.pos -= 1;
            return self.err(format!("value `%{n}` is defined twice"));
        }
        let v = self.types.push(ty);
        self.vals.insert(n, v);
        Ok(v)
    }

    fn val(&mut self) -> Result<Value> {
        match self.peek().cloned() {
            Some(Tok::Val(n)) => match self.vals.get(&n) {
                Some(v) => {
                    self.pos += 1;
                    Ok(*v)
                }
                None => self.err(format!("value `%{n}` is used before it is defined")),
            },
            t => self.err(format!(
                "expected a value `%N`, found {}",
                describe(t.as_ref())
            )),
        }
    }

    fn module(&mut self) -> Result<Module> {
        let mut m = Module::default();
        while self.peek().is_some() {
            m.functions.push(self.function()?);
        }
        Ok(m)
    }

    fn function(&mut self) -> Result<Function> {
        self.vals.clear();
        self.types.clear();
        let level = match self.ident()?.as_str() {
            "host" => Level::Host,
            "device" => Level::Device,
            "compute" => Level::Compute,
            "sample" => Level::Sample,
            other => {
                self.pos -= 1;
                return self.err(format!(
                    "expected a function level `host`, `device`, `compute` or `sample`, found `{other}`"
                ));
            }
        };
        let name = match self.next() {
            Some(Tok::Func(n)) => n,
            t => {
                self.pos -= 1;
                return self.err(format!("expected `@name`, found {}", describe(t.as_ref())));
            }
        };
        self.expect_punct("(")?;
        let mut params = vec![];
        while !self.is_punct(")") {
            if !params.is_empty() {
                self.expect_punct(",")?;
            }
            let out = self.is_ident("out");
            if out {
                self.pos += 1;
            }
            let n = match self.next() {
                Some(Tok::Val(n)) => n,
                t => {
                    self.pos -= 1;
                    return self.err(format!(
                        "expected a parameter `%N`, found {}",
                        describe(t.as_ref())
                    ));
                }
            };
            let pname = self.ident()?;
            self.expect_punct(":")?;
            let ty = self.ty()?;
            let value = self.define(n, ty)?;
            params.push(Param {
                name: pname,
                value,
                out,
            });
        }
        self.expect_punct(")")?;
        let body = self.block()?;
        Ok(Function {
            name,
            level,
            params,
            values: std::mem::take(&mut self.types),
            ops: std::mem::take(&mut self.arena),
            body,
        })
    }

    fn block(&mut self) -> Result<Block> {
        Ok(self.block_with_loc()?.0)
    }

    /// A block, and the source location written after its `{` (that of the `for` or `if`).
    fn block_with_loc(&mut self) -> Result<(Block, Option<crate::ir::Loc>)> {
        self.expect_punct("{")?;
        let loc = self.loc_token();
        let mut ops = vec![];
        while !self.is_punct("}") {
            if self.peek().is_none() {
                return self.err("expected `}` before the end of input");
            }
            let op = self.op()?;
            ops.push(self.arena.push(op));
        }
        self.expect_punct("}")?;
        Ok((Block { ops }, loc))
    }

    /// Takes a `;@ file:line:column` token when one is next.
    fn loc_token(&mut self) -> Option<crate::ir::Loc> {
        match self.peek() {
            Some(Tok::Loc(l)) => {
                let l = l.clone();
                self.pos += 1;
                Some(l)
            }
            _ => None,
        }
    }

    /// A constant's text: `true`, an integer, a float (its text kept: the result's dtype
    /// decides how it is read), or `nan(0x...)` with a NaN's bits.
    fn constant(&mut self) -> Result<(crate::ir::Const, Option<String>)> {
        let s = match self.peek().cloned() {
            Some(Tok::Ident(s)) => {
                self.pos += 1;
                s
            }
            _ => self.num()?,
        };
        let c = if s == "true" || s == "false" {
            crate::ir::Const::Bool(s == "true")
        } else if let Ok(i) = s.parse::<i128>() {
            crate::ir::Const::Int(i)
        } else if s == "nan" && self.is_punct("(") {
            // `nan(0x7fc00000)`: a NaN with its bits; the width picks the dtype and
            // the result type must agree (checked below).
            self.expect_punct("(")?;
            let h = self.num()?;
            let bits = h
                .strip_prefix("0x")
                .and_then(|x| u64::from_str_radix(x, 16).ok().map(|b| (b, x.len())));
            self.expect_punct(")")?;
            match bits {
                Some((b, 8)) if f32::from_bits(b as u32).is_nan() => {
                    crate::ir::Const::F32(f32::from_bits(b as u32))
                }
                Some((b, 16)) if f64::from_bits(b).is_nan() => {
                    crate::ir::Const::F64(f64::from_bits(b))
                }
                _ => {
                    self.pos -= 2;
                    return self.err(format!(
                        "expected the bits of a NaN (8 hex digits for f32, 16 for f64, e.g. `nan(0x7fc00000)`), found `{h}`"
                    ));
                }
            }
        } else if let Ok(x) = s.parse::<f64>() {
            // Re-read in the result's dtype below (`0.1` as an f32 is the f32
            // nearest 0.1, not the f64 nearest 0.1 rounded again).
            return Ok((crate::ir::Const::F64(x), Some(s)));
        } else {
            self.pos -= 1;
            return self.err(format!("expected a constant, found `{s}`"));
        };
        Ok((c, None))
    }

    fn op(&mut self) -> Result<Op> {
        let result_num = if let Some(Tok::Val(n)) = self.peek().cloned() {
            self.pos += 1;
            self.expect_punct("=")?;
            Some(n)
        } else {
            None
        };
        let name_pos = self.pos;
        let name = self.ident()?;
        // The op's format reads its keyword.
        self.pos = name_pos;
        self.float_text = None;
        let outer = self.block_loc.take();
        let read = OpKind::read_text(&name, self);
        let block_loc = std::mem::replace(&mut self.block_loc, outer);
        let mut kind = match read {
            Ok(Some(k)) => k,
            Ok(None) => {
                self.pos = name_pos;
                return self.err(format!("unknown op `{name}`"));
            }
            Err(Failed) => return Err(self.take_failure()),
        };
        self.bind_defs();
        let float_text = self.float_text.take();
        use OpKind::Const;
        let result = match result_num {
            Some(n) => {
                self.expect_punct(":")?;
                let ty = self.ty()?;
                if let (Some(t), Type::Scalar(DType::F32)) = (&float_text, &ty) {
                    if let Ok(x) = t.parse::<f32>() {
                        kind = Const(crate::ir::Const::F32(x));
                    }
                }
                // A float storage constant: the text rounded once to the dtype, held as `f32`.
                if let (Some(t), Type::Scalar(d)) = (&float_text, &ty) {
                    if let (true, Ok(x)) = (d.is_narrow_float(), t.parse::<f64>()) {
                        let v = crate::eval::narrow_float(x, *d).widen_float();
                        kind = Const(crate::ir::Const::F32(v));
                    }
                }
                Some(self.define(n, ty)?)
            }
            None => {
                if self.is_punct(":") {
                    return self.err(format!("op `{name}` has a type but no result `%N =`"));
                }
                None
            }
        };
        let mut loc = block_loc.flatten();
        if loc.is_none() {
            loc = self.loc_token();
        }
        Ok(Op { result, kind, loc })
    }
}

impl Parser {
    /// Records `e` for the format that is reading (see [`Reader`]).
    fn record(&mut self, e: IrError) -> Failed {
        self.failure = Some(e);
        Failed
    }

    /// The error a failed format read recorded.
    fn take_failure(&mut self) -> IrError {
        self.failure.take().unwrap_or_else(|| IrError::Parse {
            line: 1,
            column: 1,
            message: "internal: a format read failed without an error".into(),
        })
    }

    /// Puts the values the op defines in scope (at its first block, or after the op).
    fn bind_defs(&mut self) {
        for (n, v) in self.pending_defs.drain(..) {
            self.vals.insert(n, v);
        }
    }
}

/// The parser as an op's declared format reads it ([`crate::ir::form`]).
impl Reader for Parser {
    fn word(&mut self) -> ReadResult<String> {
        self.ident().map_err(|e| self.record(e))
    }
    fn is_word(&self, w: &str) -> bool {
        self.is_ident(w)
    }
    fn expect_word(&mut self, w: &str) -> ReadResult<()> {
        self.expect_ident(w).map_err(|e| self.record(e))
    }
    fn is_punct(&self, p: &str) -> bool {
        Parser::is_punct(self, p)
    }
    fn expect_punct(&mut self, p: &str) -> ReadResult<()> {
        Parser::expect_punct(self, p).map_err(|e| self.record(e))
    }
    fn num(&mut self) -> ReadResult<String> {
        Parser::num(self).map_err(|e| self.record(e))
    }
    fn val(&mut self) -> ReadResult<Value> {
        Parser::val(self).map_err(|e| self.record(e))
    }
    fn is_val(&self) -> bool {
        matches!(self.peek(), Some(Tok::Val(_)))
    }
    fn comma_then_val(&self) -> bool {
        Parser::is_punct(self, ",")
            && matches!(self.toks.get(self.pos + 1), Some((Tok::Val(_), ..)))
    }
    fn def(&mut self) -> ReadResult<Value> {
        let n = match self.next() {
            Some(Tok::Val(n)) => n,
            t => {
                self.pos -= 1;
                let e = self.error(format!(
                    "expected a new value `%N` (a loop variable), found {}",
                    describe(t.as_ref())
                ));
                return Err(self.record(e));
            }
        };
        if self.vals.contains_key(&n) || self.pending_defs.iter().any(|(m, _)| *m == n) {
            self.pos -= 1;
            let e = self.error(format!("value `%{n}` is defined twice"));
            return Err(self.record(e));
        }
        let v = self.types.push(Type::Scalar(DType::Index));
        self.pending_defs.push((n, v));
        Ok(v)
    }
    fn block(&mut self) -> ReadResult<Block> {
        self.bind_defs();
        let (b, loc) = self.block_with_loc().map_err(|e| self.record(e))?;
        // The op's location is written after its first block's `{`.
        if self.block_loc.is_none() {
            self.block_loc = Some(loc);
        }
        Ok(b)
    }
    fn func(&mut self) -> ReadResult<String> {
        match self.next() {
            Some(Tok::Func(f)) => Ok(f),
            t => {
                self.pos -= 1;
                let e = self.error(format!(
                    "expected `@callee`, found {}",
                    describe(t.as_ref())
                ));
                Err(self.record(e))
            }
        }
    }
    fn dim(&mut self) -> ReadResult<Dim> {
        Parser::dim(self).map_err(|e| self.record(e))
    }
    fn constant(&mut self) -> ReadResult<crate::ir::Const> {
        let (c, text) = Parser::constant(self).map_err(|e| self.record(e))?;
        self.float_text = text;
        Ok(c)
    }
    fn fail(&mut self, back: usize, message: String) -> Failed {
        self.pos = self.pos.saturating_sub(back);
        let e = self.error(message);
        self.record(e)
    }
}

/// Parses IR text (as written by [`crate::print_module`]) into a module. Does not verify it:
/// run [`crate::verify_module`] on the result.
///
/// # Errors
/// [`IrError::Parse`] with the line, column, what was expected and what was found.
pub fn parse_module(src: &str) -> Result<Module> {
    let toks = Lexer::lex(src)?;
    let mut p = Parser {
        toks,
        pos: 0,
        vals: HashMap::new(),
        types: Default::default(),
        arena: Default::default(),
        failure: None,
        float_text: None,
        pending_defs: vec![],
        block_loc: None,
    };
    p.module()
}

#[cfg(test)]
mod tests {
    use crate::{parse_module, print_module, print_module_with_locs, Module, OpKind};

    const LOCATED: &str = "device @k(%0 x: tensor<[4], f32>, out %1 y: tensor<[4], f32>) {
  %2 = const 0 : index ;@ src/heat.rs:41:9
  for %3 in %2..%2 { ;@ src/heat.rs:42:5
    %4 = load %0[%3] : tile<[4], f32> ;@ C:/work/src/heat.rs:43:17
    store %4, %1[%3] ;@ src/heat.rs:43:9
  }
}
";

    /// Equality and printing see the ops the body lists, not the arena's layout:
    /// an unlisted op changes neither, and [`Function::compact`] drops it and renumbers the
    /// arena in program order.
    #[test]
    fn the_arena_layout_is_not_the_function() {
        let m = parse_module(LOCATED).unwrap();
        let mut f = m.functions[0].clone();
        // The parser lists nested ops before the op holding them.
        assert_eq!(f.ops.len(), 4);
        assert_eq!(f.body.ops, [crate::ir::OpId(0), crate::ir::OpId(3)]);
        f.ops.push(crate::ir::Op::placeholder());
        assert_eq!(f, m.functions[0]);
        f.compact();
        assert_eq!(f, m.functions[0]);
        assert_eq!(f.ops.len(), 4);
        assert_eq!(f.listed(), (0..4).map(crate::ir::OpId).collect::<Vec<_>>());
        assert_eq!(
            print_module_with_locs(&Module {
                functions: vec![f.clone()]
            }),
            LOCATED
        );
        // A listed op that differs does count.
        let store = f.listed()[3];
        f.ops[store].loc = None;
        assert_ne!(f, m.functions[0]);
    }

    #[test]
    fn source_locations_round_trip_and_print_only_when_asked() {
        let m = parse_module(LOCATED).unwrap();
        assert_eq!(print_module_with_locs(&m), LOCATED);
        let plain = print_module(&m);
        assert!(!plain.contains(";@"), "{plain}");
        // The plain form parses to the same ops without locations.
        let again = parse_module(&plain).unwrap();
        assert_eq!(print_module(&again), plain);
        let f = &m.functions[0];
        let l = f.op(f.body.ops[1]).loc.as_ref().unwrap();
        assert_eq!((&*l.file, l.line, l.column), ("src/heat.rs", 42, 5));
        let OpKind::For { body, .. } = &f.op(f.body.ops[1]).kind else {
            panic!()
        };
        // A file name holding `:` keeps it.
        assert_eq!(
            &*f.op(body.ops[0]).loc.as_ref().unwrap().file,
            "C:/work/src/heat.rs"
        );
        let g = &again.functions[0];
        assert!(g.op(g.body.ops[0]).loc.is_none());
    }

    #[test]
    fn a_malformed_location_is_a_parse_error_at_its_place() {
        let bad = "compute @f() {\n  %0 = const 0 : index ;@ src/heat.rs:forty\n}\n";
        let e = parse_module(bad).unwrap_err();
        let crate::IrError::Parse { line, message, .. } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(*line, 2);
        assert!(message.contains("`;@ file:line:column`"), "{message}");
        let stray = "compute @f( ;@ a.rs:1:1\n) {\n}\n";
        let e = parse_module(stray).unwrap_err().to_string();
        assert!(e.contains("it may only end an op's line"), "{e}");
    }
}
