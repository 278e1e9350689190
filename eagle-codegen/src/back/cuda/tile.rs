//! Tile ops in CUDA C ([`eagle_ir::TileOp`]), in the orders [`eagle_ir::TileOp::eval`] fixes.
//!
//! Each output element is computed by one formula from its operands' elements: a sum or
//! product over eight lanes and the fixed tree ([`eagle_ir::tile::reduce_order`]), an
//! argmax/argmin scan, a matmul dot product over ascending `k` with a separate multiply and
//! add, or an index map (expand, transpose, concat, extract, iota). In thread mode (sample
//! kernels) the operands are the thread's own arrays. In block mode (per-device programs) a
//! tile is striped over the block, so the op first stages its tile operands into shared memory
//! (`eg_sh`: the block's one scratch buffer, which `EG_SHARED` points each function at, so
//! a caller and its callees reuse it), synchronises, computes the elements
//! this thread owns, and synchronises again before the scratch is reused. `reshape` keeps
//! every element at its linear index and so at its thread and slot: it copies slots.

use super::{cast, ctype, literal, CPrim, Emitter, Mode};
use crate::error::CodegenError;
use eagle_ir::prim;
use eagle_ir::tile::{reduce_identity, strides, ArgOp, Axis, TileOp, REDUCE_LANES};
use eagle_ir::{BinOp, DType, Op, OpKind, Value};

/// Most bytes of shared memory a tile op of a per-device program may stage (CUDA's static
/// shared memory per block).
pub const MAX_SHARED_BYTES: u64 = 48 << 10;

/// Where a sorted element comes from: its sequence (`start`, `stride`, `len` elements) and
/// its position in the sorted sequence (`pos`), as C expressions.
struct SortArgs<'a> {
    start: &'a str,
    stride: u64,
    pos: &'a str,
    len: u64,
}

impl Emitter<'_> {
    /// `a <op> b` in C on dtype `d`, as the elementwise op computes it.
    fn comb(&self, op: BinOp, a: &str, b: &str, d: DType) -> Result<String, CodegenError> {
        let fake = Op {
            result: None,
            kind: OpKind::Binary(op, Value(0), Value(0)),
            loc: None,
        };
        self.expr(&fake, &[a.to_string(), b.to_string()], d, d)
    }

    /// The multi-index of result element `i` in `shape`, as C expressions.
    fn unravel(shape: &[u64]) -> Vec<String> {
        let st = strides(shape);
        (0..shape.len())
            .map(|d| format!("((i / {}LL) % {}LL)", st[d], shape[d]))
            .collect()
    }

    fn ravel(idx: &[String], shape: &[u64]) -> String {
        let st = strides(shape);
        let terms: Vec<String> = idx
            .iter()
            .zip(&st)
            .map(|(x, s)| format!("{x} * {s}LL"))
            .collect();
        if terms.is_empty() {
            "0".into()
        } else {
            terms.join(" + ")
        }
    }

    /// Emits the eight-lane reduction of `len` elements of `src` from `start` by `stride` into
    /// `dst` (a C lvalue).
    #[allow(clippy::too_many_arguments)]
    fn emit_reduce(
        &mut self,
        op: eagle_ir::ReduceOp,
        src: &str,
        start: &str,
        stride: u64,
        len: u64,
        d: DType,
        dst: &str,
    ) -> Result<(), CodegenError> {
        let t = ctype(d);
        let id = literal(reduce_identity(op, d).to_const(), d);
        let b = op.bin_op();
        self.line("{");
        self.depth += 1;
        self.line(format!("{t} l[{REDUCE_LANES}];"));
        self.line(format!(
            "for (int j = 0; j < {REDUCE_LANES}; ++j) l[j] = {id};"
        ));
        self.line(format!("for (long long e = 0; e < {len}LL; ++e) {{"));
        self.depth += 1;
        self.line(format!("const {t} x = {src}[{start} + e * {stride}LL];"));
        let c = self.comb(b, "l[e & 7]", "x", d)?;
        self.line(format!("l[e & 7] = {c};"));
        self.close();
        // The tree of `eagle_ir::prim::lane_tree`, its partials named by the lanes they span.
        let lanes = ["0", "1", "2", "3", "4", "5", "6", "7"].map(|j| (format!("l[{j}]"), j, j));
        prim::lane_tree::<_, CodegenError>(lanes, |(x, x0, _), (y, _, y1), root| {
            let c = self.comb(b, &x, &y, d)?;
            if root {
                self.line(format!("{dst} = {c};"));
                return Ok((String::new(), x0, y1));
            }
            let name = format!("t{x0}{y1}");
            self.line(format!("const {t} {name} = {c};"));
            Ok((name, x0, y1))
        })?;
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Emits `dst = ` output `i` of `scatter`/`scatter_add` ([`TileOp::Scatter`]).
    fn emit_scatter_element(
        &mut self,
        (add, axis): (bool, usize),
        srcs: &[String],
        shapes: &[Vec<u64>],
        rd: DType,
        dst: &str,
    ) -> Result<(), CodegenError> {
        let s0 = &shapes[0];
        // Output (r, c): the base, then every value whose index lands here, in index
        // order; every thread checks the indices of its row (column).
        let (n, k) = (s0[1], shapes[1][1]);
        let extent = if axis == 0 { s0[0] } else { n };
        let (base, idx, vals) = (&srcs[0], &srcs[1], &srcs[2]);
        // The indices that can land on output i, and what they must equal.
        let (count, slot, target) = if axis == 0 {
            let c = shapes[1][0];
            (c, format!("q_ * {n}LL + i % {n}LL"), format!("i / {n}LL"))
        } else {
            (k, format!("(i / {n}LL) * {k}LL + q_"), format!("i % {n}LL"))
        };
        let t = ctype(rd);
        self.line("{");
        self.depth += 1;
        self.line(format!("{t} acc = {base}[i];"));
        self.line(format!("for (long long q_ = 0; q_ < {count}LL; ++q_) {{"));
        self.depth += 1;
        self.line(format!("const long long e_ = {slot};"));
        self.line(format!("const long long q = (long long)({idx}[e_]);"));
        self.line(format!(
            "if (q < 0 || q >= {extent}LL) {{ bad = 1; continue; }}"
        ));
        let v = if add {
            self.comb(BinOp::Add, "acc", &format!("{vals}[e_]"), rd)?
        } else {
            format!("{vals}[e_]")
        };
        self.line(format!("if (q == {target}) acc = {v};"));
        self.close();
        self.line(format!("{dst} = acc;"));
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Emits `dst = ` the running combination (`op`) of the first `count` elements of the
    /// sequence `src[start + e * stride]`, in index order ([`TileOp::Scan`]).
    #[allow(clippy::too_many_arguments)]
    fn emit_scan(
        &mut self,
        op: eagle_ir::ReduceOp,
        src: &str,
        start: &str,
        stride: u64,
        count: &str,
        d: DType,
        dst: &str,
    ) -> Result<(), CodegenError> {
        let t = ctype(d);
        self.line("{");
        self.depth += 1;
        self.line(format!("{t} acc = {src}[{start}];"));
        self.line(format!("for (long long e = 1; e < {count}; ++e) {{"));
        self.depth += 1;
        self.line(format!("const {t} x = {src}[{start} + e * {stride}LL];"));
        let c = self.comb(op.bin_op(), "acc", "x", d)?;
        self.line(format!("acc = {c};"));
        self.close();
        self.line(format!("{dst} = acc;"));
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Emits `dst = ` the element at position `pos` of the sequence `src[start + e * stride]`
    /// (`len` elements) in its stable sorted order (with `indices`, its index): the element
    /// `j` that exactly `pos` elements precede ([`eagle_ir::prim::precedes`]).
    fn emit_sorted(&mut self, src: &str, a: &SortArgs<'_>, d: DType, indices: bool, dst: &str) {
        let t = ctype(d);
        let (start, stride, pos, len) = (a.start, a.stride, a.pos, a.len);
        let before = prim::precedes(
            &mut CPrim(d),
            d.is_float(),
            &"xq".to_string(),
            &"xj".to_string(),
            "(q < j)".to_string(),
        );
        self.line("{");
        self.depth += 1;
        self.line(format!("const long long pos = {pos};"));
        self.line(format!("for (long long j = 0; j < {len}LL; ++j) {{"));
        self.depth += 1;
        self.line(format!("const {t} xj = {src}[{start} + j * {stride}LL];"));
        self.line("long long r = 0;");
        self.line(format!("for (long long q = 0; q < {len}LL; ++q) {{"));
        self.depth += 1;
        self.line(format!("const {t} xq = {src}[{start} + q * {stride}LL];"));
        self.line(format!("r += {before} ? 1 : 0;"));
        self.close();
        let v = if indices { "j" } else { "xj" };
        self.line(format!("if (r == pos) {{ {dst} = {v}; break; }}"));
        self.close();
        self.depth -= 1;
        self.line("}");
    }

    /// Emits the argmax (argmin) scan ([`eagle_ir::tile::arg_better`]) into `dst`.
    #[allow(clippy::too_many_arguments)]
    fn emit_arg(
        &mut self,
        op: ArgOp,
        src: &str,
        start: &str,
        stride: u64,
        len: u64,
        d: DType,
        dst: &str,
    ) {
        let t = ctype(d);
        let better = prim::arg_better(
            &mut CPrim(d),
            op,
            d.is_float(),
            &"x".to_string(),
            &"bv".to_string(),
        );
        self.line("{");
        self.depth += 1;
        self.line("long long bi = 0;");
        self.line(format!("{t} bv = {src}[{start}];"));
        self.line(format!("for (long long e = 1; e < {len}LL; ++e) {{"));
        self.depth += 1;
        self.line(format!("const {t} x = {src}[{start} + e * {stride}LL];"));
        self.line(format!("if ({better}) {{ bi = e; bv = x; }}"));
        self.close();
        self.line(format!("{dst} = bi;"));
        self.depth -= 1;
        self.line("}");
    }

    /// Emits a tile op (see the module docs).
    pub(super) fn emit_tile(&mut self, op: &Op) -> Result<(), CodegenError> {
        let OpKind::Tile(t, args) = &op.kind else {
            return Err(self.err("internal: not a tile op"));
        };
        let Some(r) = op.result else { return Ok(()) };
        let rd = self.dtype(r)?;
        let scalar_res = !self.is_tile(r);
        let rshape = if scalar_res { vec![] } else { self.shape(r)? };
        let n: u64 = rshape.iter().product();
        if scalar_res {
            self.line(format!("{} v{};", ctype(rd), r.0));
        } else {
            self.declare_tile(r, n, rd)?;
        }
        // Element-local ops: no staging.
        if let TileOp::Reshape = t {
            self.open_tile_loop(n);
            self.line(format!("v{}[k] = v{}[k];", r.0, args[0].0));
            self.close();
            return Ok(());
        }
        if matches!(t, TileOp::Full | TileOp::Expand) && !self.is_tile(args[0]) {
            self.open_tile_loop(n);
            self.line(format!("v{}[k] = v{};", r.0, args[0].0));
            self.close();
            return Ok(());
        }
        if let TileOp::Iota(axis) = t {
            let idx = Self::unravel(&rshape);
            self.open_tile_loop(n);
            let x = cast(&idx[*axis], DType::I64, rd);
            self.line(format!("v{}[k] = {x};", r.0));
            self.close();
            return Ok(());
        }
        // Operand arrays: staged in shared memory in block mode.
        self.line("{");
        self.depth += 1;
        let mut srcs = vec![];
        let mut shapes = vec![];
        let mut dts = vec![];
        let mut off = 0u64;
        for (j, &a) in args.iter().enumerate() {
            let s = self.shape(a)?;
            let d = self.dtype(a)?;
            let na: u64 = s.iter().product();
            let name = format!("s{j}");
            match self.mode {
                Mode::Thread => self.line(format!("const {}* {name} = v{};", ctype(d), a.0)),
                Mode::Block => {
                    self.line(format!(
                        "{}* {name} = ({}*)(eg_sh + {off});",
                        ctype(d),
                        ctype(d)
                    ));
                    self.open_tile_loop(na);
                    self.line(format!("{name}[i] = v{}[k];", a.0));
                    self.close();
                    off += (na * d.size() as u64).div_ceil(16) * 16;
                }
            }
            srcs.push(name);
            shapes.push(s);
            dts.push(d);
        }
        if self.mode == Mode::Block {
            if off > MAX_SHARED_BYTES {
                return Err(self.err(format!(
                    "{}: `{}` stages {off} bytes of tiles in shared memory, more than the {MAX_SHARED_BYTES} a per-device program's block may hold; use smaller tiles (its tile operands together under {MAX_SHARED_BYTES} bytes)",
                    self.site_op(op),
                    t.name()
                )));
            }
            self.shared_bytes = self.shared_bytes.max(off);
            self.line("__syncthreads();");
        }
        let dst = if scalar_res {
            format!("v{}", r.0)
        } else {
            format!("v{}[k]", r.0)
        };
        if let TileOp::Reduce(rop, Axis::All) = t {
            let d = self.dtype(args[0])?;
            let len: u64 = shapes[0].iter().product();
            // Every thread computes the whole reduction alike (scalars are replicated).
            self.emit_reduce(*rop, &srcs[0], "0", 1, len, d, &dst)?;
        } else {
            // A gather checks its indices: every thread looks at its elements, then the
            // block fails together (the one message of `sites::gather_index`).
            let checked = if let TileOp::Gather(axis) = t {
                Some((None, *axis))
            } else if let TileOp::Scatter { add, axis } = t {
                Some((Some(*add), *axis))
            } else {
                None
            };
            let check = if let Some((scatter, axis)) = checked {
                let extent = shapes[0][if axis == 0 { 0 } else { 1 }];
                let (f, at) = (&self.f.name, self.site_op(op));
                let msg = match scatter {
                    None => crate::sites::gather_index(f, &at, axis, extent),
                    Some(add) => crate::sites::scatter_index(f, &at, add, axis, extent),
                };
                let site = self.sites.len();
                self.sites.push(self.placed(msg));
                self.line("int bad = 0;");
                Some(site)
            } else {
                None
            };
            self.open_tile_loop(n);
            self.emit_tile_element(t, &srcs, &shapes, &dts, &rshape, rd, &dst)?;
            self.close();
            if let Some(site) = check {
                match self.mode {
                    Mode::Block => self.line(format!(
                        "if (__syncthreads_or(bad)) {{ if (lane == 0) eg_fail(rt, {site}, 0, 0); return 1; }}"
                    )),
                    Mode::Thread => {
                        self.line(format!("if (bad) return eg_fail(rt, {site}, 0, 0);"))
                    }
                }
            }
        }
        if self.mode == Mode::Block {
            self.line("__syncthreads();");
        }
        self.depth -= 1;
        self.line("}");
        Ok(())
    }

    /// Emits `dst = <element i of the op>` inside a tile loop; `dts` are the operands'
    /// dtypes.
    #[allow(clippy::too_many_arguments)]
    fn emit_tile_element(
        &mut self,
        t: &TileOp,
        srcs: &[String],
        shapes: &[Vec<u64>],
        dts: &[DType],
        rshape: &[u64],
        rd: DType,
        dst: &str,
    ) -> Result<(), CodegenError> {
        let s0 = &shapes[0];
        match t {
            TileOp::Reduce(rop, axis) => {
                let (start, stride, len) = match axis {
                    Axis::Row => (format!("i * {}LL", s0[1]), 1, s0[1]),
                    _ => ("i".to_string(), s0[1], s0[0]),
                };
                self.emit_reduce(*rop, &srcs[0], &start, stride, len, rd, dst)?;
            }
            TileOp::Gather(axis) => {
                let (n, k) = (s0[1], shapes[1][1]);
                let extent = if *axis == 0 { s0[0] } else { n };
                self.line(format!("const long long q = (long long)({}[i]);", srcs[1]));
                self.line(format!(
                    "if (q < 0 || q >= {extent}LL) {{ bad = 1; continue; }}"
                ));
                let at = if *axis == 0 {
                    format!("q * {n}LL + i % {k}LL")
                } else {
                    format!("(i / {k}LL) * {n}LL + q")
                };
                self.line(format!("{dst} = {}[{at}];", srcs[0]));
            }
            TileOp::Scatter { add, axis } => {
                self.emit_scatter_element((*add, *axis), srcs, shapes, rd, dst)?
            }
            TileOp::Sort(axis) | TileOp::ArgSort(axis) => {
                let n = s0[1];
                let (start, stride, pos, len) = if *axis == 1 {
                    (format!("(i / {n}LL) * {n}LL"), 1, format!("i % {n}LL"), n)
                } else {
                    (format!("i % {n}LL"), n, format!("i / {n}LL"), s0[0])
                };
                let indices = matches!(t, TileOp::ArgSort(_));
                let args = SortArgs {
                    start: &start,
                    stride,
                    pos: &pos,
                    len,
                };
                self.emit_sorted(&srcs[0], &args, dts[0], indices, dst);
            }
            TileOp::Scan(op, axis) => {
                // Element (r, c): the running value of its row up to column c (axis 1), or of
                // its column up to row r (axis 0).
                let n = s0[1];
                let (start, stride, count) = if *axis == 1 {
                    (format!("(i / {n}LL) * {n}LL"), 1, format!("i % {n}LL + 1"))
                } else {
                    (format!("i % {n}LL"), n, format!("i / {n}LL + 1"))
                };
                self.emit_scan(*op, &srcs[0], &start, stride, &count, rd, dst)?;
            }
            TileOp::Arg(aop, axis) => {
                let (start, stride, len) = match axis {
                    Axis::Row => (format!("i * {}LL", s0[1]), 1, s0[1]),
                    _ => ("i".to_string(), s0[1], s0[0]),
                };
                self.emit_arg(*aop, &srcs[0], &start, stride, len, dts[0], dst);
            }
            TileOp::Expand => {
                let idx = Self::unravel(rshape);
                let st = strides(s0);
                let terms: Vec<String> = (0..s0.len())
                    .filter(|&d| s0[d] != 1)
                    .map(|d| format!("{} * {}LL", idx[d], st[d]))
                    .collect();
                let at = if terms.is_empty() {
                    "0".into()
                } else {
                    terms.join(" + ")
                };
                self.line(format!("{dst} = {}[{at}];", srcs[0]));
            }
            TileOp::Transpose => {
                // Result [N, M]: element (a, b) is source (b, a).
                let (m, nn) = (s0[0], s0[1]);
                self.line(format!(
                    "{dst} = {}[(i % {m}LL) * {nn}LL + i / {m}LL];",
                    srcs[0]
                ));
            }
            TileOp::Concat(axis) => {
                let idx = Self::unravel(rshape);
                let ax = *axis;
                let mut bidx = idx.clone();
                bidx[ax] = format!("({} - {}LL)", idx[ax], s0[ax]);
                self.line(format!(
                    "{dst} = {} < {}LL ? {}[{}] : {}[{}];",
                    idx[ax],
                    s0[ax],
                    srcs[0],
                    Self::ravel(&idx, s0),
                    srcs[1],
                    Self::ravel(&bidx, &shapes[1])
                ));
            }
            TileOp::Extract(offs) => {
                let idx: Vec<String> = Self::unravel(rshape)
                    .into_iter()
                    .zip(offs)
                    .map(|(x, o)| format!("({x} + {o}LL)"))
                    .collect();
                self.line(format!("{dst} = {}[{}];", srcs[0], Self::ravel(&idx, s0)));
            }
            TileOp::Matmul | TileOp::MatmulAcc => {
                let (ops, dims) = (t.gemm_operands(srcs), t.gemm_operands(shapes));
                let (Some((c, a, b)), Some((_, sa, sb))) = (ops, dims) else {
                    return Err(self.err("internal: a product without its operands"));
                };
                let (k, nn) = (sa[1], sb[1]);
                self.line("{");
                self.depth += 1;
                self.line(format!("const long long ii = i / {nn}LL, jj = i % {nn}LL;"));
                let c0 = c.map(|c| format!("{c}[i]"));
                let v = prim::dot(self, rd, k, c0, &mut |_, q| {
                    Ok((
                        format!("{a}[ii * {k}LL + {q}]"),
                        format!("{b}[{q} * {nn}LL + jj]"),
                    ))
                })?;
                self.line(format!("{dst} = {v};"));
                self.depth -= 1;
                self.line("}");
            }
            TileOp::Reshape | TileOp::Full | TileOp::Iota(_) => {
                return Err(self.err("internal: element-local tile op in emit_element"))
            }
        }
        Ok(())
    }
}

/// The C emitter's instance of [`prim::DotEmitter`]: C expressions, the accumulator a local
/// `c`, each product a local `p` (so that the sum is a statement of its own), `k` a loop over
/// `q`.
impl prim::DotEmitter for Emitter<'_> {
    type V = String;
    type Ix = String;
    type Acc = String;
    type Err = CodegenError;
    fn identity(&mut self, d: DType) -> String {
        literal(eagle_ir::tile::add_identity(d).to_const(), d)
    }
    fn acc(&mut self, d: DType, init: String) -> String {
        self.line(format!("{} c = {init};", ctype(d)));
        "c".into()
    }
    fn get(&mut self, acc: &String) -> String {
        acc.clone()
    }
    fn set(&mut self, acc: &String, v: String) {
        self.line(format!("{acc} = {v};"));
    }
    fn mul(&mut self, d: DType, a: &String, b: &String) -> Result<String, CodegenError> {
        let p = self.comb(BinOp::Mul, a, b, d)?;
        self.line(format!("const {} p = {p};", ctype(d)));
        Ok("p".into())
    }
    fn add(&mut self, d: DType, a: &String, b: &String) -> Result<String, CodegenError> {
        self.comb(BinOp::Add, a, b, d)
    }
    fn ascending(
        &mut self,
        k: u64,
        step: &mut prim::DotStep<'_, Self>,
    ) -> Result<(), CodegenError> {
        self.line(format!("for (long long q = 0; q < {k}LL; ++q) {{"));
        self.depth += 1;
        step(self, "q".into())?;
        self.close();
        Ok(())
    }
}
