//! Blocks of wider matrices fed to `matmul`/`matmul_acc`: the CPU backend lets the GEMM read
//! them where they are, rows the matrix's row length apart (`BlockPlan::strided`), unless the
//! block has another use or memory may be written before the product (then the block is
//! copied first). `matmul(a, transpose(x))` lets the GEMM read `x` as `b`'s transpose
//! (`tile::transposed_operands`) when the product follows the transpose and is its only use.
//! Checked against a plain-Rust golden in eagle's order on `sim` and `cpu`.
use eagle::prelude::*;

const R: usize = 8;
const C: usize = 24;
const B: usize = 8;

/// `y0 = x[:, 8..16] w[8..16, 0..8]`, `y1 = y0 + x[:, 0..8] w[0..8, 8..16]` (through an
/// identity cast), and `y2` the product of blocks read before a store overwrites `x`'s
/// block: the product must see the old values. `y3` uses a block in an elementwise op as
/// well as in the product.
#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn blocks(
    ctx: Ctx,
    x: Tensor<f32, R, C>,
    w: Tensor<f32, C, C>,
    y0: Out<Tensor<f32, R, B>>,
    y1: Out<Tensor<f32, R, B>>,
    y2: Out<Tensor<f32, R, B>>,
    y3: Out<Tensor<f32, R, B>>,
    s: Out<Tensor<f32, R, C>>,
    y4: Out<Tensor<f32, R, B>>,
    o: Out<Tensor<f32, R, B>>,
) {
    let a = load(x, [0, B], [R, B]);
    let b = load(w, [B, 0], [B, B]);
    let p = matmul(a, b);
    store(y0, [0, 0], p);
    let a1 = load(x, [0, 0], [R, B]);
    let b1 = load(w, [0, B], [B, B]) as f32;
    store(y1, [0, 0], matmul_acc(p, a1, b1));
    store(s, [0, 0], load(x, [0, 0], [R, C]));
    let a2 = load(s, [0, 2 * B], [R, B]);
    store(s, [0, 2 * B], zeros([R, B], f32));
    store(y2, [0, 0], matmul(a2, b));
    let a3 = load(x, [0, 2 * B], [R, B]);
    store(y3, [0, 0], matmul(a3, b) + a3);
    let t = load(x, [0, B], [R, B]);
    store(y4, [0, 0], matmul(a3, t as f32));
    if rank(ctx) == 0 {
        store(o, [0, 0], t);
    }
}

#[eagle::host]
#[allow(clippy::too_many_arguments)]
pub fn blocks_host(
    x: Tensor<f32, R, C>,
    w: Tensor<f32, C, C>,
    y0: Out<Tensor<f32, R, B>>,
    y1: Out<Tensor<f32, R, B>>,
    y2: Out<Tensor<f32, R, B>>,
    y3: Out<Tensor<f32, R, B>>,
    s: Out<Tensor<f32, R, C>>,
    y4: Out<Tensor<f32, R, B>>,
    o: Out<Tensor<f32, R, B>>,
) {
    blocks(x, w, y0, y1, y2, y3, s, y4, o, device = 0);
}

/// `c0 + a b` for `a` `[m, k]` at `a(i, kk)`, `b` `[k, n]` at `b(kk, j)`, ascending `k`.
fn mm(
    c: Option<&[f32]>,
    [m, k, n]: [usize; 3],
    a: &dyn Fn(usize, usize) -> f32,
    b: &dyn Fn(usize, usize) -> f32,
) -> Vec<f32> {
    (0..m * n)
        .map(|e| {
            let (i, j) = (e / n, e % n);
            let c0 = c.map_or(-0.0, |c| c[e]);
            (0..k).fold(c0, |acc, kk| acc + a(i, kk) * b(kk, j))
        })
        .collect()
}

/// `c + a[.., ac..ac+B] w[wr..wr+B, wc..wc+B]` (`a` and `w` `C` wide) by [`mm`].
fn product(
    c: Option<&[f32]>,
    a: &[f32],
    ac: usize,
    w: &[f32],
    (wr, wc): (usize, usize),
) -> Vec<f32> {
    mm(c, [R, B, B], &|i, k| a[i * C + ac + k], &|k, j| {
        w[(wr + k) * C + wc + j]
    })
}

fn check(s: &Session) {
    let xd: Vec<f32> = (0..R * C)
        .map(|i| ((i * 37) % 23) as f32 * 0.37 - 3.1)
        .collect();
    let wd: Vec<f32> = (0..C * C)
        .map(|i| ((i * 11) % 19) as f32 * 0.21 - 1.7)
        .collect();
    let x = Tensor::from_vec(&[R, C], xd.clone()).unwrap();
    let w = Tensor::from_vec(&[C, C], wd.clone()).unwrap();
    let mut y: Vec<Tensor<f32>> = (0..6).map(|_| Tensor::<f32>::zeros(&[R, B])).collect();
    let mut sc = Tensor::<f32>::zeros(&[R, C]);
    let [y0, y1, y2, y3, y4, o] = &mut y[..] else {
        unreachable!()
    };
    blocks_host
        .launch(s, &x, &w, y0, y1, y2, y3, &mut sc, y4, o)
        .unwrap();
    let p = product(None, &xd, B, &wd, (B, 0));
    let want = [
        p.clone(),
        product(Some(&p), &xd, 0, &wd, (0, B)),
        product(None, &xd, 2 * B, &wd, (B, 0)),
        product(None, &xd, 2 * B, &wd, (B, 0))
            .iter()
            .enumerate()
            .map(|(e, v)| v + xd[(e / B) * C + 2 * B + e % B])
            .collect(),
        product(None, &xd, 2 * B, &xd, (0, B)),
        (0..R * B).map(|e| xd[(e / B) * C + B + e % B]).collect(),
    ];
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (k, (got, want)) in y.iter().zip(&want).enumerate() {
        assert_eq!(bits(got.data()), bits(want), "y{k}");
    }
}

#[test]
fn blocks_of_wider_matrices_multiply_as_copies_do_on_sim() {
    check(&Session::sim(1).unwrap());
}

#[test]
fn blocks_of_wider_matrices_multiply_as_copies_do_on_cpu() {
    check(&Session::new(eagle::runtime::Platform::Cpu, vec![0]).unwrap());
}

/// Rows of `a`, the shared `k`, and `n` (on AVX-512, one whole 64-column panel and a cut one).
const TM: usize = 12;
const TK: usize = 48;
const TN: usize = 80;

/// `p0 = x w^T` and `p1 = c + x w^T` read `w` as `b`'s transpose, and so does `p4 = c + x w^T`
/// with the transpose taken before the loads of `c` and `x`; `p2` multiplies by a transpose
/// that is also stored (two uses: copied); `p3 = x^T c` has the transpose as `a` (copied).
#[eagle::kernel(device)]
#[allow(clippy::too_many_arguments)]
pub fn transposed(
    ctx: Ctx,
    x: Tensor<f32, TM, TK>,
    w: Tensor<f32, TN, TK>,
    c: Tensor<f32, TM, TN>,
    p0: Out<Tensor<f32, TM, TN>>,
    p1: Out<Tensor<f32, TM, TN>>,
    p2: Out<Tensor<f32, TM, TN>>,
    wt: Out<Tensor<f32, TK, TN>>,
    p3: Out<Tensor<f32, TK, TN>>,
    p4: Out<Tensor<f32, TM, TN>>,
) {
    let a = load(x, [0, 0], [TM, TK]);
    store(p0, [0, 0], matmul(a, transpose(load(w, [0, 0], [TN, TK]))));
    store(
        p1,
        [0, 0],
        matmul_acc(
            load(c, [0, 0], [TM, TN]),
            a,
            transpose(load(w, [0, 0], [TN, TK])),
        ),
    );
    let t = transpose(load(w, [0, 0], [TN, TK]));
    store(p2, [0, 0], matmul(a, t));
    store(wt, [0, 0], t);
    store(p3, [0, 0], matmul(transpose(a), load(c, [0, 0], [TM, TN])));
    let later = transpose(load(w, [0, 0], [TN, TK]));
    let c0 = load(c, [0, 0], [TM, TN]) * 1.0;
    store(p4, [0, 0], matmul_acc(c0, load(x, [0, 0], [TM, TK]), later));
}

#[eagle::host]
#[allow(clippy::too_many_arguments)]
pub fn transposed_host(
    x: Tensor<f32, TM, TK>,
    w: Tensor<f32, TN, TK>,
    c: Tensor<f32, TM, TN>,
    p0: Out<Tensor<f32, TM, TN>>,
    p1: Out<Tensor<f32, TM, TN>>,
    p2: Out<Tensor<f32, TM, TN>>,
    wt: Out<Tensor<f32, TK, TN>>,
    p3: Out<Tensor<f32, TK, TN>>,
    p4: Out<Tensor<f32, TM, TN>>,
) {
    transposed(x, w, c, p0, p1, p2, wt, p3, p4, device = 0);
}

fn check_transposed(s: &Session) {
    let data = |n: usize, m: usize, d: f32| -> Vec<f32> {
        (0..n).map(|i| ((i * m) % 29) as f32 * 0.19 - d).collect()
    };
    let (xd, wd, cd) = (
        data(TM * TK, 13, 2.3),
        data(TN * TK, 7, 1.9),
        data(TM * TN, 5, 2.7),
    );
    let x = Tensor::from_vec(&[TM, TK], xd.clone()).unwrap();
    let w = Tensor::from_vec(&[TN, TK], wd.clone()).unwrap();
    let c = Tensor::from_vec(&[TM, TN], cd.clone()).unwrap();
    let mut p: Vec<Tensor<f32>> = (0..3).map(|_| Tensor::zeros(&[TM, TN])).collect();
    let mut q: Vec<Tensor<f32>> = (0..2).map(|_| Tensor::zeros(&[TK, TN])).collect();
    let mut p4 = Tensor::zeros(&[TM, TN]);
    let ([p0, p1, p2], [wt, p3]) = (&mut p[..], &mut q[..]) else {
        unreachable!()
    };
    transposed_host
        .launch(s, &x, &w, &c, p0, p1, p2, wt, p3, &mut p4)
        .unwrap();
    let xa = |i: usize, kk: usize| xd[i * TK + kk];
    let wb = |kk: usize, j: usize| wd[j * TK + kk];
    let p0w = mm(None, [TM, TK, TN], &xa, &wb);
    let p1w = mm(Some(&cd), [TM, TK, TN], &xa, &wb);
    let want = [
        p0w.clone(),
        p1w.clone(),
        p0w,
        (0..TK * TN).map(|e| wd[(e % TN) * TK + e / TN]).collect(),
        mm(None, [TK, TM, TN], &|i, kk| xd[kk * TK + i], &|kk, j| {
            cd[kk * TN + j]
        }),
    ];
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (k, (got, want)) in p.iter().chain(&q).zip(&want).enumerate() {
        assert_eq!(bits(got.data()), bits(want), "output {k}");
    }
    assert_eq!(bits(p4.data()), bits(&p1w), "p4");
}

#[test]
fn products_with_a_transposed_operand_equal_the_copied_transposes_on_sim() {
    check_transposed(&Session::sim(1).unwrap());
}

#[test]
fn products_with_a_transposed_operand_equal_the_copied_transposes_on_cpu() {
    check_transposed(&Session::new(eagle::runtime::Platform::Cpu, vec![0]).unwrap());
}

/// The GEMM calls of `transposed`'s CLIF (the only calls with ten arguments; the last is `bt`):
/// `p0` and `p1` pass `w` as `b`'s transpose, `p2` and `p3` copied transposes; of the
/// transposes of `w`, only `p2`'s (stored too) has a tile of its own.
#[test]
fn products_with_a_transposed_b_read_its_operand_without_a_copy() {
    let clif = eagle::cranelift_ir::<transposed_host>(1, &[]).unwrap();
    let bts: Vec<&str> = clif
        .lines()
        .filter_map(|l| {
            let args = l
                .split_once("call ")?
                .1
                .split_once('(')?
                .1
                .split_once(')')?
                .0;
            let last = args.split(", ").nth(9)?;
            // The constant's value, from the comment after the call.
            l.split(&format!("{last} = ")).nth(1)?.split(',').next()
        })
        .collect();
    assert_eq!(bts, ["1", "1", "0", "0", "1"], "{clif}");
    // Two `TK x TN` tiles: `p2`'s transpose and `p3`'s product.
    let slots = clif
        .matches(&format!("explicit_slot {},", TK * TN * 4))
        .count();
    assert_eq!(slots, 2, "{clif}");
}
