//! Building the value ops: tile intrinsics, elementwise arithmetic, comparisons, casts,
//! views and elements, tile loads and stores.

use super::*;

impl FunctionBuilder<'_> {
    /// A tile intrinsic (`row_sum(t)`, `matmul(a, b)`, `zeros([M, N], f32)`, ...; the list
    /// and the argument kinds are [`crate::tile::INTRINSICS`]). `args` are the call's
    /// arguments in order, as [`TileArg`]s.
    ///
    /// # Errors
    /// [`IrError::Build`], with the source line, for an unknown name, arguments of the wrong
    /// kind, and every typing error of [`crate::TileOp::infer`] (a row reduction of a 1-D
    /// tile, matmul inner dims that differ, a reshape that changes the element count, an
    /// extract outside the tile, a broadcast of incompatible shapes).
    pub fn tile_intrinsic(&mut self, name: &str, args: Vec<TileArg>) -> Result<Value> {
        use crate::tile::TileOp;
        let Some(intr) = crate::tile::intrinsic(name) else {
            return self.err(format!("`{name}` is not a tile intrinsic{}", self.here()));
        };
        let mut vals = vec![];
        let mut shape = None;
        let mut offsets = vec![];
        let mut axis = None;
        let mut dtype = None;
        let mut hint = None;
        for a in &args {
            if let TileArg::Value(Operand::Val(v)) = a {
                hint = hint.or(self.ty(*v).dtype());
            }
        }
        for a in args {
            match a {
                TileArg::Value(o) => vals.push(o),
                TileArg::Shape(s) => shape = Some(Shape(s)),
                TileArg::Offsets(o) => offsets = o,
                TileArg::Axis(x) => axis = Some(x),
                TileArg::DType(d) => dtype = Some(d),
            }
        }
        let ax = axis.unwrap_or(0);
        // The kernel's name is the op's IR keyword, except for the ops that take an axis or
        // offsets, and `zeros` (a `full` of 0).
        let scan = crate::ReduceOp::ALL
            .into_iter()
            .find(|o| o.scan_names()[0] == name);
        let op = match name {
            _ if scan.is_some() => TileOp::Scan(scan.unwrap_or(crate::ReduceOp::Sum), ax),
            "concat" => TileOp::Concat(ax),
            "sort" => TileOp::Sort(ax),
            "gather" => TileOp::Gather(ax),
            "scatter" => TileOp::Scatter {
                add: false,
                axis: ax,
            },
            "scatter_add" => TileOp::Scatter {
                add: true,
                axis: ax,
            },
            "argsort" => TileOp::ArgSort(ax),
            "iota" => TileOp::Iota(ax),
            "extract" => {
                let mut offs = vec![];
                for o in offsets {
                    match o {
                        Operand::Int(i) | Operand::Typed(Const::Int(i), _) if i >= 0 => {
                            offs.push(i as u64)
                        }
                        Operand::Int(i) | Operand::Typed(Const::Int(i), _) => {
                            return self.err(format!("`extract`'s offset {i} is negative{}; offsets count elements from the tile's first, from 0", self.here()))
                        }
                        Operand::Dim(Dim::Const(i)) => offs.push(i),
                        _ => return self.err(format!("`extract`'s offsets are compile-time constants (literals or Rust `const`s){}; to take a sub-tile at a run-time offset, `load` it from the tensor", self.here())),
                    }
                }
                TileOp::Extract(offs)
            }
            "zeros" => {
                let d = dtype.unwrap_or(DType::F32);
                if d == DType::E8M0 {
                    return self.err(format!("`zeros` of `e8m0`: the scale dtype has no zero (its values are the powers of two 2^-127 ..= 2^127){}; make the tile `full(shape, 1.0, e8m0)`, or zeros of the dtype it scales", self.here()));
                }
                let zero = match d {
                    DType::F64 => Const::F64(0.0),
                    DType::Bool => Const::Bool(false),
                    // `f32`, and a float storage dtype's constant: the `f32` of its value.
                    d if d.is_float() => Const::F32(0.0),
                    _ => Const::Int(0),
                };
                vals.push(Operand::Typed(zero, d));
                TileOp::Full
            }
            _ => match TileOp::from_name(name) {
                Some(op) => op,
                None => return self.err(format!("internal: tile intrinsic `{name}` has no op")),
            },
        };
        let vals = vals
            .into_iter()
            .map(|o| self.value(o, hint))
            .collect::<Result<Vec<_>>>()?;
        let tys: Vec<&Type> = vals.iter().map(|&v| self.ty(v)).collect();
        let ty = match op.infer(&tys, shape.as_ref(), dtype) {
            Ok(t) => t,
            Err(e) => {
                return self.err(format!(
                    "{e}{}; the call is `{}`",
                    self.here(),
                    intr.signature
                ))
            }
        };
        Ok(self.push(OpKind::Tile(op, vals), ty))
    }

    /// `topk(t, k)`: along each row of an `[M, N]` tile of numbers, the `k` largest elements in
    /// descending order (`[M, k]`, `t`'s dtype) and their column indices (`[M, k]`, `i64`).
    /// Ties go to the lower index; `-0.0` and `+0.0` tie; a NaN counts below every number.
    /// Built from ops with one order on every backend: `argsort` along the row of a key that
    /// reverses the order exactly (`-t` for floats, `!t` for integers, which cannot
    /// overflow), the first `k` columns of it (`extract`), and `gather`.
    ///
    /// # Errors
    /// [`IrError::Build`], with the source line, when `t` is not a 2-D tile of numbers or `k`
    /// is not a constant in `1..=N`.
    pub fn topk(&mut self, t: impl Into<Operand>, k: Dim) -> Result<(Value, Value)> {
        let t = self.value(t, None)?;
        let (m, n, d) = match self.ty(t) {
            Type::Tile(s, d) if s.rank() == 2 && *d != DType::Bool => {
                (s.0[0].clone(), s.0[1].clone(), *d)
            }
            other => {
                return self.err(format!(
                    "`topk` takes a 2-D tile of numbers (`[M, N]`), found `{other}`{}",
                    self.here()
                ))
            }
        };
        let fits = match (k.as_const(), n.as_const()) {
            (Some(k), Some(n)) => k >= 1 && k <= n,
            (Some(k), None) => k >= 1,
            (None, _) => false,
        };
        if !fits {
            return self.err(format!(
                "`topk`'s k is {k} but the rows have {n} elements{}; k is a constant in 1..={n}",
                self.here()
            ));
        }
        let key = if d.is_float() {
            self.un(UnOp::Neg, t)?
        } else {
            self.un(UnOp::Not, t)?
        };
        let order = self.tile_intrinsic(
            "argsort",
            vec![TileArg::Value(key.into()), TileArg::Axis(1)],
        )?;
        let zero = || Operand::Int(0);
        let idx = self.tile_intrinsic(
            "extract",
            vec![
                TileArg::Value(order.into()),
                TileArg::Offsets(vec![zero(), zero()]),
                TileArg::Shape(vec![m, k]),
            ],
        )?;
        let vals = self.tile_intrinsic(
            "gather",
            vec![
                TileArg::Value(t.into()),
                TileArg::Value(idx.into()),
                TileArg::Axis(1),
            ],
        )?;
        Ok((vals, idx))
    }

    /// `saturating_cast(x, dtype)`: `x as dtype` for a float `dtype`, except that a value
    /// beyond the largest finite value of `dtype` (an infinity included) becomes that value
    /// with its sign, where `as` gives infinity (`f16`, `bf16`, `f8e5m2`, `f32`) or NaN
    /// (`f8e4m3`, `e8m0`); a NaN stays NaN. For `e8m0` the range is `[0, 2^127]`, so a
    /// negative number becomes `2^-127`. This is NVIDIA's `__NV_SATFINITE` and the OCP
    /// specification's saturating conversion (OFP8 rev. 1.0, section 5). Built as `max`, `min`
    /// and `as` in `f32` (`f64` when `x` or `dtype` is `f64`), so it needs no backend code.
    ///
    /// # Errors
    /// [`IrError::Build`], with the source line, when `dtype` is not a float dtype (an integer
    /// `as` already saturates) or `x` is not a number.
    pub fn saturating_cast(&mut self, x: impl Into<Operand>, dtype: DType) -> Result<Value> {
        let x = self.value(x, None)?;
        let from = self.ty(x).dtype().unwrap_or(DType::Bool);
        if !dtype.is_float() || from == DType::Bool || matches!(self.ty(x), Type::Ref(_)) {
            return self.err(format!(
                "`saturating_cast` converts a number to a float dtype, found `{}` to `{}`{}; an integer `as` cast saturates already",
                rust_name(from),
                rust_name(dtype),
                self.here()
            ));
        }
        let wide = if dtype == DType::F64 || from == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let max = match crate::math::narrow::Format::of(dtype) {
            Some(f) => f.max(),
            None if dtype == DType::F32 => f32::MAX as f64,
            None => f64::MAX,
        };
        let lo = if dtype == DType::E8M0 { 0.0 } else { -max };
        let w = if from == wide { x } else { self.cast(x, wide)? };
        let c = self.bin(BinOp::Max, w, Operand::Float(lo))?;
        let c = self.bin(BinOp::Min, c, Operand::Float(max))?;
        self.cast(c, dtype)
    }

    /// `matmul_mx(a, scale_a, b, scale_b)`: the OCP MX block-scaled matmul. `a` is an
    /// `[M, K]` tile and `b` a `[K, N]` tile of `f8e4m3` or `f8e5m2` (each its own), `K` a
    /// multiple of 32 ([`crate::MX_BLOCK`]); `scale_a` is `[M, K / 32]` and `scale_b`
    /// `[K / 32, N]`, of `e8m0`: element `a[i][k]` stands for `a[i][k] * scale_a[i][k / 32]`,
    /// and `b[k][j]` for `b[k][j] * scale_b[k / 32][j]` (OCP Microscaling Formats (MX)
    /// Specification v1.0, sections 5 and 6.3). The result is `[M, N]` `f32`.
    ///
    /// The order, on every backend: each element is widened to `f32` and multiplied by its
    /// scale (exact, unless the product leaves `f32`'s range), then the two `f32` tiles are
    /// multiplied by `matmul`, which accumulates in `f32` in its documented order
    /// ([`crate::tile::TileOp::eval`]). Built from `as`, `iota`, `gather`, `*` and `matmul`, so
    /// it needs no backend code and inherits their coverage.
    ///
    /// # Errors
    /// [`IrError::Build`], with the source line, naming the operand, when an operand is not a
    /// 2-D tile of its dtype, the inner dims differ, `K` is not a constant multiple of 32, or a
    /// scale's shape is not the one above.
    pub fn matmul_mx(
        &mut self,
        a: impl Into<Operand>,
        scale_a: impl Into<Operand>,
        b: impl Into<Operand>,
        scale_b: impl Into<Operand>,
    ) -> Result<Value> {
        let sig = "matmul_mx(a, scale_a, b, scale_b)";
        let vals = [
            self.value(a, None)?,
            self.value(scale_a, None)?,
            self.value(b, None)?,
            self.value(scale_b, None)?,
        ];
        let names = ["a", "scale_a", "b", "scale_b"];
        let mut dims = vec![];
        for (i, v) in vals.iter().enumerate() {
            let want = if i % 2 == 0 {
                "`f8e4m3` or `f8e5m2`"
            } else {
                "`e8m0`"
            };
            match self.ty(*v) {
                Type::Tile(s, d)
                    if s.rank() == 2
                        && (if i % 2 == 0 {
                            matches!(d, DType::F8E4M3 | DType::F8E5M2)
                        } else {
                            *d == DType::E8M0
                        }) =>
                {
                    dims.push((s.0[0].clone(), s.0[1].clone()));
                }
                other => {
                    return self.err(format!(
                        "`{sig}`: operand `{}` must be a 2-D tile of {want}, found `{other}`{}",
                        names[i],
                        self.here()
                    ))
                }
            }
        }
        let (m, k) = dims[0].clone();
        let n = dims[2].1.clone();
        let blocks = match k.as_const() {
            Some(k) if k > 0 && k % crate::MX_BLOCK == 0 => Dim::Const(k / crate::MX_BLOCK),
            _ => {
                return self.err(format!(
                    "`{sig}`: `a` is `[{m}, {k}]`, but K must be a constant multiple of {}{}; pad K with zeros (their scale is irrelevant)",
                    crate::MX_BLOCK,
                    self.here()
                ))
            }
        };
        let want = [
            (m.clone(), k.clone()),
            (m.clone(), blocks.clone()),
            (k.clone(), n.clone()),
            (blocks, n.clone()),
        ];
        for i in 1..4 {
            if dims[i] != want[i] {
                return self.err(format!(
                    "`{sig}`: operand `{}` must be `[{}, {}]` for `a` of `[{m}, {k}]`, found `[{}, {}]`{}",
                    names[i],
                    want[i].0,
                    want[i].1,
                    dims[i].0,
                    dims[i].1,
                    self.here()
                ));
            }
        }
        let mut scaled = vec![];
        for (x, s, shape, axis) in [
            (vals[0], vals[1], vec![m, k.clone()], 1),
            (vals[2], vals[3], vec![k, n], 0),
        ] {
            let xf = self.cast(x, DType::F32)?;
            let sf = self.cast(s, DType::F32)?;
            let pos = self.tile_intrinsic(
                "iota",
                vec![
                    TileArg::Shape(shape),
                    TileArg::Axis(axis),
                    TileArg::DType(DType::I64),
                ],
            )?;
            let block = self.bin(BinOp::Div, pos, Operand::Int(crate::MX_BLOCK as i128))?;
            let each = self.tile_intrinsic(
                "gather",
                vec![
                    TileArg::Value(sf.into()),
                    TileArg::Value(block.into()),
                    TileArg::Axis(axis),
                ],
            )?;
            scaled.push(self.bin(BinOp::Mul, xf, each)?);
        }
        self.tile_intrinsic(
            "matmul",
            vec![
                TileArg::Value(scaled[0].into()),
                TileArg::Value(scaled[1].into()),
            ],
        )
    }

    /// Appends elementwise op `kind` with the type [`crate::typing::result_type`] gives it (the
    /// rule the verifier applies too, so a kernel's mistake is reported here, at its source
    /// line); `to` is a conversion's target dtype (`None` for the other ops).
    ///
    /// # Errors
    /// [`IrError::Build`] with the rule's message and the source line.
    pub(super) fn push_elementwise(&mut self, kind: OpKind, to: Option<DType>) -> Result<Value> {
        let ty = crate::typing::result_type(&kind, |v| self.cur.ty(v), to);
        match ty {
            Some(Ok(t)) => Ok(self.push(kind, t)),
            Some(Err(m)) => self.err(format!("{m}{}", self.here())),
            None => self.err(format!(
                "internal: `{}` is not elementwise, or a conversion without its target dtype",
                kind.info().name
            )),
        }
    }

    /// `a <op> b`.
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn bin(
        &mut self,
        op: BinOp,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Value> {
        let (a, mut b) = self.pair(a.into(), b.into())?;
        if let (BinOp::Shl | BinOp::Shr, Some(da), Some(db)) =
            (op, elem(self.ty(a)), elem(self.ty(b)))
        {
            // Rust shifts any integer by any integer (`i32 >> u32`); the IR's shift takes one
            // dtype. The amount converts with `as`, which keeps its low bits: the bits the
            // shift reads (`prim::shift` takes it modulo the width, at most 64).
            if da != db && da.is_int() && db.is_int() {
                b = self.cast(b, da)?;
            }
        }
        let [a, b] = self.broadcast_operands(op.name(), [a, b])?;
        self.push_elementwise(OpKind::Binary(op, a, b), None)
    }

    /// `a <op> b` as an operand: two unsuffixed integer literals fold to one (exactly, in
    /// `i128`), which stays untyped and takes its dtype from where it is used, as a Rust
    /// literal expression does (`let c: i32 = 2 * 3;`, `x / (0 - 1)` with an `i32` `x`); a
    /// result that does not fit the dtype it takes is then E021, as rustc's
    /// `arithmetic_overflow` is a compile error. Anything else is [`FunctionBuilder::bin`].
    ///
    /// # Errors
    /// [`IrError::Build`] for a literal division or remainder by zero, a literal result
    /// outside `i128`, and as [`FunctionBuilder::bin`].
    pub fn bin_lit(
        &mut self,
        op: BinOp,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Operand> {
        let (a, b) = (a.into(), b.into());
        let float_lit = |o: &Operand| matches!(o, Operand::Float(_) | Operand::FloatExpr(..));
        if float_lit(&a)
            && float_lit(&b)
            && matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div)
        {
            // Computed once the dtype is known (Rust's inference of `{float}`).
            return Ok(Operand::FloatExpr(op, Box::new(a), Box::new(b)));
        }
        let (Operand::Int(x), Operand::Int(y)) = (&a, &b) else {
            return Ok(Operand::Val(self.bin(op, a, b)?));
        };
        let (x, y) = (*x, *y);
        let folded = match op {
            BinOp::Add => x.checked_add(y),
            BinOp::Sub => x.checked_sub(y),
            BinOp::Mul => x.checked_mul(y),
            BinOp::Div | BinOp::Rem if y == 0 => {
                return self.err(format!(
                    "`{}` of the integer literals {x} and {y} divides by zero; Rust refuses it at compile time too",
                    op.name()
                ))
            }
            BinOp::Div => x.checked_div(y),
            BinOp::Rem => x.checked_rem(y),
            BinOp::Min => Some(x.min(y)),
            BinOp::Max => Some(x.max(y)),
            BinOp::And => Some(x & y),
            BinOp::Or => Some(x | y),
            BinOp::Xor => Some(x ^ y),
            // Rust folds literal shifts exactly and refuses an amount past the width.
            BinOp::Shl => u32::try_from(y).ok().filter(|&s| s < 64).map(|s| x << s),
            BinOp::Shr => u32::try_from(y).ok().filter(|&s| s < 64).map(|s| x >> s),
        };
        match folded {
            Some(v) => Ok(Operand::Int(v)),
            None => self.err(format!(
                "`{}` of the integer literals {x} and {y} overflows every integer dtype",
                op.name()
            )),
        }
    }

    /// `op a`.
    ///
    /// # Errors
    /// [`IrError::Build`] for an operand that is neither scalar nor tile.
    pub fn un(&mut self, op: UnOp, a: impl Into<Operand>) -> Result<Value> {
        let a = self.value(a, None)?;
        self.push_elementwise(OpKind::Unary(op, a), None)
    }

    /// A function of the math library ([`crate::math`]), elementwise: `ln(x)`, `atan2(y, x)`,
    /// `powi(x, n)`. Operand 0 is `f32` or `f64` (a float literal takes the dtype of the other
    /// operand, else `f32`); the others have its dtype, except `powi`'s exponent (`i32`).
    /// Tiles broadcast as for `+`.
    ///
    /// # Errors
    /// [`IrError::Build`] naming the function, the operand, the dtype found and the fix, for
    /// a wrong number of operands, an integer operand 0 or another operand of the wrong dtype;
    /// and for shapes that do not broadcast.
    pub fn math(&mut self, f: crate::math::MathFn, args: Vec<Operand>) -> Result<Value> {
        let (n, sig) = (f.name(), f.signature());
        if args.len() != f.arity() {
            return self.err(format!(
                "`{n}({sig})` takes {} operand(s), found {}{}",
                f.arity(),
                args.len(),
                self.here()
            ));
        }
        let float = args
            .iter()
            .enumerate()
            .filter(|(i, _)| f.operand_dtype(*i, DType::F64) == DType::F64)
            .find_map(|(_, a)| self.hint_of(a).filter(|d| d.is_float()));
        let d0 = float.unwrap_or(DType::F32);
        let mut vals = Vec::with_capacity(args.len());
        for (i, a) in args.into_iter().enumerate() {
            let want = f.operand_dtype(i, d0);
            if let (Operand::Int(k), true) = (&a, want.is_float()) {
                // Rust has no implicit int-to-float conversion: `f64::ln(2)` does not compile.
                return self.err(format!(
                    "operand {i} of `{n}({sig})`{}: expected `{}`, found the integer literal `{k}`; write `{k}.0`",
                    self.here(),
                    rust_name(want)
                ));
            }
            let v = self.value(a, Some(want))?;
            let got = elem(self.ty(v));
            if got != Some(want) {
                let found = match got {
                    Some(d) => format!("`{}`", rust_name(d)),
                    None => format!("`{}`", self.ty(v)),
                };
                let fix = if i == 0 {
                    "convert it with `as f64` (or `as f32`)".to_string()
                } else {
                    format!("convert it with `as {}`", rust_name(want))
                };
                return self.err(format!(
                    "operand {i} of `{n}({sig})`{}: expected `{}`, found {found}; {fix}",
                    self.here(),
                    rust_name(want)
                ));
            }
            vals.push(v);
        }
        if vals.len() == 2 {
            let [a, b] = self.broadcast_operands(n, [vals[0], vals[1]])?;
            vals = vec![a, b];
        }
        self.push_elementwise(OpKind::Math(f, vals), None)
    }

    /// `a * b + c` with one rounding.
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn fma(
        &mut self,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
        c: impl Into<Operand>,
    ) -> Result<Value> {
        let (a, b, c) = (a.into(), b.into(), c.into());
        let h = self.hint_of(&a).or(self.hint_of(&b)).or(self.hint_of(&c));
        let (a, b, c) = (self.value(a, h)?, self.value(b, h)?, self.value(c, h)?);
        let [a, b, c] = self.broadcast_operands("fma", [a, b, c])?;
        self.push_elementwise(OpKind::Fma(a, b, c), None)
    }

    /// `a <cmp> b`, a `bool` (or a tile of `bool`).
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn cmp(
        &mut self,
        op: CmpOp,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Value> {
        let (a, b) = self.pair(a.into(), b.into())?;
        let [a, b] = self.broadcast_operands(op.name(), [a, b])?;
        self.push_elementwise(OpKind::Cmp(op, a, b), None)
    }

    /// `select(cond, a, b)`.
    ///
    /// # Errors
    /// [`IrError::Build`] for operands that are neither scalars nor tiles.
    pub fn select(
        &mut self,
        cond: impl Into<Operand>,
        a: impl Into<Operand>,
        b: impl Into<Operand>,
    ) -> Result<Value> {
        let c = self.value(cond, Some(DType::Bool))?;
        let (a, b) = self.pair(a.into(), b.into())?;
        let [c, a, b] = self.broadcast_operands("select", [c, a, b])?;
        self.push_elementwise(OpKind::Select(c, a, b), None)
    }

    /// `a as dtype`.
    ///
    /// # Errors
    /// [`IrError::Build`] for an operand that is neither scalar nor tile.
    pub fn cast(&mut self, a: impl Into<Operand>, dtype: DType) -> Result<Value> {
        let a = self.value(a, Some(dtype))?;
        self.push_elementwise(OpKind::Cast(a), Some(dtype))
    }

    /// The same bits as `dtype` (`f32::from_bits(u)`, and [`FunctionBuilder::to_bits`]).
    ///
    /// # Errors
    /// [`IrError::Build`], with the source line, unless the operand and `dtype` are a float
    /// and an integer of the same width ([`DType::bitcasts_to`]).
    pub fn bitcast(&mut self, a: impl Into<Operand>, dtype: DType) -> Result<Value> {
        let a = self.value(a, dtype.bits_dtype())?;
        self.push_elementwise(OpKind::Bitcast(a), Some(dtype))
    }

    /// `x.to_bits()`: an `f32`'s bits as `u32`, an `f64`'s as `u64`, an `f16`'s or `bf16`'s
    /// as `u16`, an 8-bit float's (`f8e4m3`, `f8e5m2`, `e8m0`) as `u8`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `x` is not a float.
    pub fn to_bits(&mut self, a: impl Into<Operand>) -> Result<Value> {
        let a = self.value(a, None)?;
        let from = self.ty(a).dtype();
        match from.and_then(DType::bits_dtype) {
            Some(bits) => self.bitcast(a, bits),
            None => self.err(format!(
                "`.to_bits()` takes a float (`f8e4m3`, `f8e5m2`, `e8m0`, `f16`, `bf16`, `f32`, `f64`), found `{}`{}",
                from.map_or("?", rust_name),
                self.here()
            )),
        }
    }

    /// `x[i]`: the sub-tensor at `i` of dim 0.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a tensor of rank >= 1.
    pub fn slice(&mut self, src: Value, index: impl Into<Operand>) -> Result<Value> {
        let index = self.value(index, Some(DType::Index))?;
        match self.ty(src).clone() {
            Type::Tensor(s, d) if s.rank() >= 1 => {
                let ty = Type::Tensor(Shape(s.0[1..].to_vec()), d);
                Ok(self.push(OpKind::Slice { src, index }, ty))
            }
            Type::Window(s, _) => self.err(format!(
                "a window of type `{}` cannot be sliced: index one element with one index per dim (`w{}`) or move tiles with `load` / `store`{}",
                self.ty(src),
                "[i]".repeat(s.rank().max(1)),
                self.here()
            )),
            t => self.err(format!(
                "indexing `x[i]` needs a tensor of rank >= 1, found `{t}`"
            )),
        }
    }

    pub(super) fn offsets(&mut self, offsets: Vec<Operand>) -> Result<Vec<Value>> {
        offsets
            .into_iter()
            .map(|o| self.value(o, Some(DType::Index)))
            .collect()
    }

    /// `x[i]` in source: in device, compute and sample functions, an element of a rank-1 tensor
    /// or window (a scalar); otherwise (rank >= 2, or on the host) the sub-tensor at `i`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` cannot be indexed.
    pub fn index(&mut self, base: Value, i: impl Into<Operand>) -> Result<Value> {
        let t = self.ty(base).clone();
        match (&t, self.func.level) {
            (Type::Tensor(s, d) | Type::Window(s, d), l) if s.rank() == 1 && l != Level::Host => {
                let d = *d;
                let i = self.value(i, Some(DType::Index))?;
                Ok(self.push(
                    OpKind::Elem {
                        src: base,
                        indices: vec![i],
                    },
                    Type::Scalar(d),
                ))
            }
            _ => self.slice(base, i),
        }
    }

    /// One step of `x[i][j]...` in source on a local value (a window parameter takes
    /// [`Self::elem`] directly), in source order: a tensor is indexed at once
    /// ([`Self::index`]: a slice, or an element of a rank-1 tensor), a window (a block view of
    /// one) collects its indices for one element access ([`Self::index_done`],
    /// [`Self::set_index_last`]).
    ///
    /// # Errors
    /// As [`Self::index`].
    pub fn index_step(&mut self, at: Indexed, i: impl Into<Operand>) -> Result<Indexed> {
        match at {
            Indexed::Value(v) if matches!(self.ty(v), Type::Window(..)) => {
                Ok(Indexed::Window(v, vec![i.into()]))
            }
            Indexed::Value(v) => Ok(Indexed::Value(self.index(v, i)?)),
            Indexed::Window(w, mut idx) => {
                idx.push(i.into());
                Ok(Indexed::Window(w, idx))
            }
        }
    }

    /// The value `x[i][j]...` reads after its [`Self::index_step`]s.
    ///
    /// # Errors
    /// As [`Self::elem`], for a window indexed other than once per dim.
    pub fn index_done(&mut self, at: Indexed) -> Result<Value> {
        match at {
            Indexed::Value(v) => Ok(v),
            Indexed::Window(w, idx) => self.elem(w, idx),
        }
    }

    /// `x[i]...[last] = v`, after the [`Self::index_step`]s of the other indices.
    ///
    /// # Errors
    /// As [`Self::set_index`] and [`Self::set_elem`].
    pub fn set_index_last(
        &mut self,
        at: Indexed,
        last: impl Into<Operand>,
        v: impl Into<Operand>,
    ) -> Result<()> {
        match at {
            Indexed::Value(b) if matches!(self.ty(b), Type::Window(..)) => {
                self.set_elem(b, vec![last.into()], v)
            }
            Indexed::Value(b) => self.set_index(b, last, v),
            Indexed::Window(w, mut idx) => {
                idx.push(last.into());
                self.set_elem(w, idx, v)
            }
        }
    }

    /// `w[i][j]...` in source: one element of a window (or tensor) of rank `indices.len()`,
    /// in a device, compute or sample function.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` is not a tensor or window of that rank, or on the host.
    pub fn elem(&mut self, base: Value, indices: Vec<Operand>) -> Result<Value> {
        let t = self.ty(base).clone();
        match &t {
            Type::Tensor(s, d) | Type::Window(s, d)
                if s.rank() == indices.len() && self.func.level != Level::Host =>
            {
                let d = *d;
                let indices = self.offsets(indices)?;
                Ok(self.push(OpKind::Elem { src: base, indices }, Type::Scalar(d)))
            }
            _ => self.err(format!(
                "an element access with {} index(es) needs a tensor or window of rank {} in a kernel, found `{t}`",
                indices.len(),
                indices.len()
            )),
        }
    }

    /// `w[i][j]... = v` in source: writes one element of a window (or tensor) of rank
    /// `indices.len()`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` is not a tensor or window of that rank, or on the host.
    pub fn set_elem(
        &mut self,
        base: Value,
        indices: Vec<Operand>,
        v: impl Into<Operand>,
    ) -> Result<()> {
        let t = self.ty(base).clone();
        match &t {
            Type::Tensor(s, d) | Type::Window(s, d)
                if s.rank() == indices.len() && self.func.level != Level::Host =>
            {
                let d = *d;
                let indices = self.offsets(indices)?;
                let value = self.value(v, Some(d))?;
                self.push_void(OpKind::SetElem {
                    value,
                    dst: base,
                    indices,
                });
                Ok(())
            }
            _ => self.err(format!(
                "an element assignment with {} index(es) needs a tensor or window of rank {} in a kernel, found `{t}`",
                indices.len(),
                indices.len()
            )),
        }
    }

    /// `x[i] = v` in source: writes one element of a rank-1 tensor or window.
    ///
    /// # Errors
    /// [`IrError::Build`] when `base` is not a rank-1 tensor or window.
    pub fn set_index(
        &mut self,
        base: Value,
        i: impl Into<Operand>,
        v: impl Into<Operand>,
    ) -> Result<()> {
        let t = self.ty(base).clone();
        match &t {
            Type::Tensor(s, d) | Type::Window(s, d) if s.rank() == 1 && self.func.level != Level::Host => {
                let d = *d;
                let i = self.value(i, Some(DType::Index))?;
                let value = self.value(v, Some(d))?;
                self.push_void(OpKind::SetElem {
                    value,
                    dst: base,
                    indices: vec![i],
                });
                Ok(())
            }
            _ => self.err(format!(
                "element assignment `x[i] = v` needs a rank-1 tensor or window in a kernel (index every dim: `y[c][s] = v`), found `{t}`"
            )),
        }
    }

    /// `[init; len]` in source: a local array of `len` scalars, each `init`, as a rank-1
    /// tensor `[len]` private to this run of the function (`let mut a = [0i32; 4]`). Its
    /// dtype is `dtype` when given (`let a: [f32; 4] = ...`), else `init`'s (an unsuffixed
    /// integer literal is `usize`, a float literal `f32`, as everywhere in eagle). The memory
    /// starts zeroed (`local_array`); a non-zero `init` is written element by element, so
    /// every backend starts from the same bits.
    ///
    /// # Errors
    /// [`IrError::Build`] on the host (local arrays live in kernels), when `init` is not a
    /// scalar, or its dtype is not `dtype`.
    pub fn array(
        &mut self,
        init: impl Into<Operand>,
        len: Dim,
        dtype: Option<DType>,
    ) -> Result<Value> {
        let init = init.into();
        let zero = match &init {
            Operand::Int(0) | Operand::Bool(false) => true,
            Operand::Float(x) => x.to_bits() == 0,
            Operand::Typed(c, _) => c.is_zero_bits(),
            _ => false,
        };
        let a = self.array_of_len(len, dtype, Some(init.clone()))?;
        if !zero {
            let d = self.ty(a).dtype().unwrap_or(DType::F32);
            let v = self.value(init, Some(d))?;
            let n = self.value(Operand::Dim(self.array_len(a)), Some(DType::Index))?;
            self.for_range(Operand::Int(0), n, |fb, i| fb.set_index(a, i, v))?;
        }
        Ok(a)
    }

    /// `[a, b, c]` in source: a local array holding `items` in order (see
    /// [`FunctionBuilder::array`]); its dtype is `dtype`, else the first item's.
    ///
    /// # Errors
    /// As [`FunctionBuilder::array`], and when `items` is empty without a `dtype`.
    pub fn array_of(&mut self, items: Vec<Operand>, dtype: Option<DType>) -> Result<Value> {
        let Some(first) = items.first().cloned() else {
            if dtype.is_none() {
                return self.err(format!(
                    "an empty array literal `[]` has no dtype; annotate it (`let a: [f32; 0] = [];`){}",
                    self.here()
                ));
            }
            return self.array_of_len(Dim::Const(0), dtype, None);
        };
        let a = self.array_of_len(Dim::Const(items.len() as u64), dtype, Some(first))?;
        for (i, x) in items.into_iter().enumerate() {
            self.set_index(a, Operand::Int(i as i128), x)?;
        }
        Ok(a)
    }

    /// The extent of local array `a`.
    fn array_len(&self, a: Value) -> Dim {
        self.ty(a)
            .shape()
            .and_then(|s| s.0.first().cloned())
            .unwrap_or(Dim::Const(0))
    }

    /// A zeroed local array of `len` elements of `dtype`, else of `init`'s dtype.
    fn array_of_len(
        &mut self,
        len: Dim,
        dtype: Option<DType>,
        init: Option<Operand>,
    ) -> Result<Value> {
        if self.func.level == Level::Host {
            return self.err(format!(
                "local arrays live in kernels (device, compute and sample functions), not in a host function{}; on the host, pass a tensor",
                self.here()
            ));
        }
        let d = match (dtype, init) {
            (Some(d), Some(Operand::Val(v))) => match self.ty(v).clone() {
                Type::Scalar(x) if x == d => d,
                t => {
                    return self.err(format!(
                        "the array is declared of `{}` but its element is `{t}`{}; convert it with `as {}`",
                        rust_name(d),
                        self.here(),
                        rust_name(d)
                    ))
                }
            },
            (Some(d), _) => d,
            // A literal's dtype as `FunctionBuilder::value` gives it, without building it.
            (None, Some(Operand::Int(_) | Operand::Dim(_))) => DType::Index,
            (None, Some(Operand::Float(_) | Operand::FloatExpr(..))) => DType::F32,
            (None, Some(Operand::Bool(_))) => DType::Bool,
            (None, Some(Operand::Typed(_, d))) => d,
            (None, Some(Operand::Val(v))) => match self.ty(v).clone() {
                Type::Scalar(d) => d,
                t => {
                    return self.err(format!(
                        "a local array holds scalars, found an element of type `{t}`{}; keep tiles in `let` bindings",
                        self.here()
                    ))
                }
            },
            (None, None) => DType::F32,
        };
        Ok(self.push(OpKind::LocalArray, Type::Tensor(Shape(vec![len]), d)))
    }

    /// `load(src, offsets, shape)`: a tile of `shape` read at `offsets`.
    ///
    /// # Errors
    /// [`IrError::Build`] when `src` is not a tensor or window.
    pub fn load(&mut self, src: Value, offsets: Vec<Operand>, shape: Vec<Dim>) -> Result<Value> {
        let offsets = self.offsets(offsets)?;
        let t = self.ty(src).clone();
        if !t.is_memory() {
            return self.err(format!("`load` reads a tensor or window, found `{t}`"));
        }
        let d = t.dtype().unwrap_or(DType::F32);
        Ok(self.push(OpKind::Load { src, offsets }, tile_of(Shape(shape), d)))
    }

    /// `store(dst, offsets, value)`.
    ///
    /// # Errors
    /// Only from materialising offsets.
    pub fn store(&mut self, dst: Value, offsets: Vec<Operand>, value: Value) -> Result<()> {
        let offsets = self.offsets(offsets)?;
        self.push_void(OpKind::Store {
            value,
            dst,
            offsets,
        });
        Ok(())
    }
}

/// A partly indexed `x[i][j]...` ([`FunctionBuilder::index_step`]): a value indexed so far, or
/// a window and the indices collected for its element access.
#[derive(Debug, Clone)]
pub enum Indexed {
    /// The value indexed so far (the base before the first step).
    Value(Value),
    /// A window and its indices so far.
    Window(Value, Vec<Operand>),
}
