//! Every tutorial step at several world sizes, the IR text round trip, and the snapshots.

mod tutorial;
use tutorial::*;

use eagle::ir::{parse_module, print_module, verify_module, EagleFn, Module};
use eagle::{codegen, Session};

/// Every host module the examples build, by name.
fn modules() -> Vec<(&'static str, Module)> {
    vec![
        ("01_hello_rank", step01::hello_rank::module().unwrap()),
        ("02_three_levels", step02::three_levels::module().unwrap()),
        ("03_window_buffer", step03::window_buffer::module().unwrap()),
        ("04_barrier", step04::barrier_step::module().unwrap()),
        ("05_ring_load", step05::ring_load::module().unwrap()),
        ("05_ring_store", step05::ring_store::module().unwrap()),
        ("06_put_get", step06::put_get::module().unwrap()),
        ("07_ring_get", step07::ring_get::module().unwrap()),
        ("07_ring_put", step07::ring_put::module().unwrap()),
        (
            "08_allreduce_mesh",
            step08::allreduce_mesh::module().unwrap(),
        ),
        (
            "09_allreduce_two_phase",
            step09::allreduce_two_phase::module().unwrap(),
        ),
        (
            "10_allreduce_ring",
            step10::allreduce_ring::module().unwrap(),
        ),
        ("11_builtin_mesh", step11::builtin_mesh::module().unwrap()),
        (
            "11_builtin_two_phase",
            step11::builtin_two_phase::module().unwrap(),
        ),
        ("11_builtin_ring", step11::builtin_ring::module().unwrap()),
        ("12_broadcast", step12::broadcast_step::module().unwrap()),
        ("13_allgather", step13::allgather_step::module().unwrap()),
        (
            "14_reduce_scatter",
            step14::reduce_scatter_step::module().unwrap(),
        ),
        ("15_all_to_all", step15::all_to_all_step::module().unwrap()),
        ("16_several_collectives", step16::several::module().unwrap()),
        ("softmax", softmax::softmax::module().unwrap()),
        ("layernorm", layernorm::layernorm::module().unwrap()),
        ("matmul", matmul::matmul_rows::module().unwrap()),
        ("gelu", gelu::gelu::module().unwrap()),
        ("log_softmax", log_softmax::log_softmax::module().unwrap()),
        ("rotary", rotary::rotary::module().unwrap()),
        (
            "sharded_softmax",
            sharded_softmax::sharded_softmax::module().unwrap(),
        ),
        (
            "sharded_layernorm",
            sharded_layernorm::sharded_layernorm::module().unwrap(),
        ),
        ("tp_ffn", tp_ffn::tp_ffn::module().unwrap()),
        ("tp_ffn_bf16", tp_ffn::tp_ffn_bf16::module().unwrap()),
        (
            "allgather_gemm",
            allgather_gemm::allgather_gemm::module().unwrap(),
        ),
        (
            "gemm_reduce_scatter",
            gemm_reduce_scatter::gemm_reduce_scatter::module().unwrap(),
        ),
        (
            "moe_dispatch_combine",
            moe_dispatch_combine::moe_dispatch_combine::module().unwrap(),
        ),
        ("halo_2d", halo_2d::halo_2d::module().unwrap()),
        (
            "ep_moe_small",
            ep_moe::small::ep_moe_small::module().unwrap(),
        ),
        (
            "ep_moe_pypto",
            ep_moe::pypto::ep_moe_pypto::module().unwrap(),
        ),
        (
            "flash_decode",
            flash_decode::flash_decode::module().unwrap(),
        ),
        (
            "fp8_gemm_rs_e4m3",
            fp8_gemm_rs::fp8_gemm_rs_e4m3::module().unwrap(),
        ),
        (
            "fp8_gemm_rs_e5m2",
            fp8_gemm_rs::fp8_gemm_rs_e5m2::module().unwrap(),
        ),
        (
            "ring_attention",
            ring_attention::ring_attention::module().unwrap(),
        ),
        ("dp_tp_mlp", dp_tp_mlp::dp_tp_mlp::module().unwrap()),
    ]
}

/// The bindings a module of `modules()` is specialized with at world size `p` (the MoE
/// program's capacity and the GEMMs' rows per rank at the runner's values).
fn bindings(name: &str, p: u64) -> codegen::Bindings {
    let b = codegen::Bindings::world(p).with("NR", p);
    match name {
        "moe_dispatch_combine" => b.with("CAP", moe_dispatch_combine::CAPACITY as u64),
        "allgather_gemm" => b.with("M", allgather_gemm::ROWS as u64),
        "gemm_reduce_scatter" => b.with("M", gemm_reduce_scatter::ROWS as u64),
        "dp_tp_mlp" => b.with("TP", dp_tp_mlp::tp_of(p as usize, false) as u64),
        _ => b,
    }
}

#[test]
fn every_step_passes_at_world_sizes_1_to_5() {
    for p in 1..=5 {
        for st in steps() {
            if st.world.refuses(p).is_some() {
                continue;
            }
            for mode in modes(&st) {
                let s = Session::sim(p).unwrap().with_mode(mode.clone());
                let out = st.execute(&s);
                assert!(
                    out.result.is_ok(),
                    "step {:02} {:?} at P={p}: {:?}",
                    st.number,
                    mode,
                    out.result
                );
            }
        }
    }
}

/// Every step with its ranks run as tasks (coroutines on one worker thread per core, what
/// worlds of 64 ranks and more get) passes, with the bits of the same step on one thread per
/// rank (issue 37, item 3).
#[test]
fn every_step_has_the_same_bits_with_ranks_as_tasks() {
    use eagle::SimRanks;
    for p in [5] {
        for st in steps() {
            if st.world.refuses(p).is_some() {
                continue;
            }
            for mode in modes(&st) {
                let run = |ranks: SimRanks| {
                    let s = Session::sim(p)
                        .unwrap()
                        .with_mode(mode.clone())
                        .with_digest(true)
                        .with_sim_ranks(ranks);
                    let out = st.execute(&s);
                    let what = format!("step {:02} {mode:?} at P={p} ({ranks:?})", st.number);
                    assert!(out.result.is_ok(), "{what}: {:?}", out.result);
                    out.digest.unwrap_or_else(|| panic!("{what}: no digest"))
                };
                assert_eq!(
                    run(SimRanks::Tasks),
                    run(SimRanks::Threads),
                    "step {:02} {mode:?} at P={p}",
                    st.number
                );
            }
        }
    }
}

/// Steps 08-11 specialized at P = 4: the hand-written algorithms and the lowered built-ins.
#[test]
fn collective_steps_specialized_snapshots() {
    let b: &[(&str, u64)] = &[("NR", 4)];
    insta::assert_snapshot!(
        "specialized_08_p4",
        step08::allreduce_mesh.ir_specialized(4, b).unwrap()
    );
    insta::assert_snapshot!(
        "specialized_09_p4",
        step09::allreduce_two_phase.ir_specialized(4, b).unwrap()
    );
    insta::assert_snapshot!(
        "specialized_10_p4",
        step10::allreduce_ring.ir_specialized(4, b).unwrap()
    );
    insta::assert_snapshot!(
        "specialized_11_ring_p4",
        step11::builtin_ring.ir_specialized(4, b).unwrap()
    );
}

#[test]
fn step07_passes_at_world_size_8() {
    for mode in ["get", "put"] {
        let s = Session::sim(8).unwrap().with_mode(Some(mode.into()));
        (step07::STEP.run)(&s).unwrap();
    }
}

/// Print, parse, print: the text must be identical, and the parsed module must verify, for
/// every generic module and every specialization at P = 1..=4.
#[test]
fn ir_text_round_trips() {
    for (name, m) in modules() {
        let mut texts = vec![print_module(&m)];
        // (tp_ffn's layout needs P to divide 1024.)
        for p in (1..=4u64).filter(|p| !name.starts_with("tp_ffn") || 1024 % p == 0) {
            texts.push(print_module(
                &codegen::specialize(&m, &bindings(name, p)).unwrap(),
            ));
        }
        for text in texts {
            let parsed = parse_module(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            verify_module(&parsed).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(print_module(&parsed), text, "{name} does not round-trip");
        }
    }
}

/// The form with source locations round-trips too, keeping every op's location, and every op
/// the macros built (and every op specialization made of them) has one.
#[test]
fn ir_text_with_source_locations_round_trips() {
    use eagle::ir::print_module_with_locs;
    for (name, m) in modules() {
        let p = if name.starts_with("tp_ffn") { 4 } else { 3 };
        let spec = codegen::specialize(&m, &bindings(name, p)).unwrap();
        for m in [m, spec] {
            let text = print_module_with_locs(&m);
            let ops = text
                .lines()
                .filter(|l| l.contains(" = ") || l.trim_start().starts_with("store "))
                .count();
            let located = text.lines().filter(|l| l.contains(" ;@ examples/")).count();
            assert!(
                ops > 0 && located >= ops,
                "{name}: {located} of {ops} ops located:\n{text}"
            );
            let parsed = parse_module(&text).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            assert_eq!(
                print_module_with_locs(&parsed),
                text,
                "{name} does not round-trip"
            );
            // Without locations the text is the snapshot form.
            assert_eq!(print_module(&parsed), print_module(&m));
        }
    }
}

#[test]
fn generic_ir_snapshots() {
    for (name, m) in modules() {
        insta::assert_snapshot!(format!("generic_{name}"), print_module(&m));
    }
}

#[test]
fn step07_specialized_snapshots() {
    for p in 2..=4u64 {
        let text = step07::ring_get.ir_specialized(p, &[("NR", p)]).unwrap();
        assert!(text.contains(&format!("tensor<[{p}, 1, 64], f32>")));
        insta::assert_snapshot!(format!("specialized_07_ring_get_p{p}"), text);
    }
}

#[test]
fn step07_cranelift_snapshot() {
    let all = eagle::cranelift_ir::<step07::ring_get>(4, &[("NR", 4)]).unwrap();
    let per_rank: String = all
        .split(";; ")
        .find(|s| s.starts_with("per_rank_get\n"))
        .expect("per_rank_get is compiled")
        .to_string();
    insta::assert_snapshot!("cranelift_07_per_rank_get_p4", per_rank);
}

#[test]
fn second_launch_at_same_world_size_hits_the_cache() {
    let s = Session::sim(4).unwrap();
    let x = eagle_runner::random_tensor(&[4, 1, 64], 70);
    let mut y = eagle::Tensor::<f32>::zeros(&[4, 1, 64]);
    // Clear first so this test's first launch compiles even if another test ran P = 4.
    let first = step07::ring_get.launch(&s, &x, &mut y).unwrap();
    let second = step07::ring_get.launch(&s, &x, &mut y).unwrap();
    assert!(
        second.cache_hit,
        "the second launch at P = 4 must not recompile"
    );
    assert_eq!(first.artifact_key, second.artifact_key);
    assert_eq!(second.compile_time, std::time::Duration::ZERO);
    // A different world size is a different artifact.
    let s3 = Session::sim(3).unwrap();
    let x3 = eagle_runner::random_tensor(&[3, 1, 64], 71);
    let mut y3 = eagle::Tensor::<f32>::zeros(&[3, 1, 64]);
    let third = step07::ring_get.launch(&s3, &x3, &mut y3).unwrap();
    assert_ne!(third.artifact_key, second.artifact_key);
}

#[test]
fn a_session_keeps_the_reports_of_the_last_launches_only() {
    assert_eq!(Session::REPORTS_KEPT, 1024);
    let s = Session::sim(1).unwrap();
    let x = eagle_runner::random_tensor(&[1, 1, 64], 3);
    let mut y = eagle::Tensor::<f32>::zeros(&[1, 1, 64]);
    // Used to keep every report until taken: 1100 here.
    for _ in 0..1100 {
        step01::hello_rank.launch(&s, &x, &mut y).unwrap();
    }
    let reports = s.take_reports();
    assert_eq!(reports.len(), 1024);
    assert!(s.take_reports().is_empty());
    // A smaller ring keeps the newest, oldest first.
    let s = Session::sim(1)
        .unwrap()
        .with_reports_kept(3)
        .with_digest(true);
    let mut keys = vec![];
    for p in 0..5 {
        let x = eagle_runner::random_tensor(&[1, 1, 64], 10 + p);
        keys.push(step01::hello_rank.launch(&s, &x, &mut y).unwrap().digest);
    }
    let kept: Vec<Option<u64>> = s.take_reports().iter().map(|r| r.digest).collect();
    assert!(kept.iter().all(Option::is_some));
    assert_eq!(kept, keys[2..]);
    let s = Session::sim(1).unwrap().with_reports_kept(0);
    step01::hello_rank.launch(&s, &x, &mut y).unwrap();
    assert!(s.take_reports().is_empty());
}

#[test]
fn repeated_runs_give_identical_bits() {
    let s = Session::sim(4).unwrap();
    let x = eagle_runner::random_tensor(&[4, 1, 64], 72);
    let mut a = eagle::Tensor::<f32>::zeros(&[4, 1, 64]);
    let mut b = eagle::Tensor::<f32>::zeros(&[4, 1, 64]);
    step02::three_levels.launch(&s, &x, &mut a).unwrap();
    step02::three_levels.launch(&s, &x, &mut b).unwrap();
    let bits = |t: &eagle::Tensor<f32>| t.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a), bits(&b));
    // A known element: sqrt(|x|) * 2 + rank, checked against the host formula bit for bit.
    let want = x.row(3)[5].abs().sqrt() * 2.0 + 3.0;
    assert_eq!(a.row(3)[5].to_bits(), want.to_bits());
}

/// The seed's "golden is one step behind" symptom: a push result checked against the pull
/// golden is reported as pull/push confusion, not as a bare element mismatch.
#[test]
fn golden_one_step_behind_is_diagnosed() {
    let s = Session::sim(4).unwrap();
    let x = eagle_runner::random_tensor(&[4, 1, 64], 73);
    let mut y = eagle::Tensor::<f32>::zeros(&[4, 1, 64]);
    step07::ring_put.launch(&s, &x, &mut y).unwrap();
    eagle_runner::golden::check_ring_shift(&y, &x, -1).unwrap();
    match eagle_runner::golden::check_ring_shift(&y, &x, 1).unwrap_err() {
        eagle::Error::Check(m) => {
            assert_eq!(
                m,
                "the result is y[r] = x[(r + P - 1) % P] (push / put mode) but the golden expects y[r] = x[(r + 1) % P] (pull / get mode); the golden is one step behind: pull and push are confused (get reads the next rank, put writes the next rank)"
            );
        }
        other => panic!("expected a Check error, got {other:?}"),
    }
}

const CHAIN: usize = 8;

/// `y = x + 1`.
#[eagle::kernel(device)]
pub fn add_one(ctx: Ctx, x: Tensor<f32, 1, CHAIN>, y: Out<Tensor<f32, 1, CHAIN>>) {
    store(y, [0, 0], load(x, [0, 0], [1, CHAIN]) + 1.0);
}

/// Two dispatches per rank, the second reading what the first wrote.
#[eagle::host]
pub fn chained(
    x: Tensor<f32, NRC, 1, CHAIN>,
    y: Out<Tensor<f32, NRC, 1, CHAIN>>,
    z: Out<Tensor<f32, NRC, 1, CHAIN>>,
) {
    for r in 0..world_size() {
        add_one(x[r], y[r], device = r);
    }
    for r in 0..world_size() {
        add_one(y[r], z[r], device = r);
    }
}

const NRC: eagle::Dim = eagle::dynamic!("NR");

#[test]
fn a_second_dispatch_to_a_rank_sees_what_the_first_wrote() {
    #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
    let mut sessions: Vec<fn(usize) -> Session> = vec![|p| Session::sim(p).unwrap()];
    // The cuda platform forwards the same bytes between device buffers (here in the CUDA
    // emulation, which needs a C++ compiler).
    #[cfg(feature = "cuda")]
    if std::process::Command::new("c++")
        .arg("--version")
        .output()
        .is_ok()
    {
        sessions.push(|p| Session::cuda_emulated(vec![0; p]).unwrap());
    }
    for (p, session) in [1usize, 3]
        .into_iter()
        .flat_map(|p| sessions.iter().map(move |s| (p, s)))
    {
        let s = session(p);
        let x = eagle_runner::random_tensor(&[p, 1, CHAIN], 5);
        let mut y = eagle::Tensor::<f32>::zeros(&[p, 1, CHAIN]);
        let mut z = eagle::Tensor::<f32>::zeros(&[p, 1, CHAIN]);
        chained.launch(&s, &x, &mut y, &mut z).unwrap();
        let want: Vec<f32> = x.data().iter().map(|v| v + 1.0 + 1.0).collect();
        eagle_runner::check_bits("z", z.data(), &want).unwrap();
    }
}

/// The distributed programs at P = 6..8 too (race detector on): the same bits as the
/// single-rank golden.
#[test]
fn distributed_programs_at_world_sizes_6_to_8() {
    for p in 6..=8 {
        for st in [sharded_softmax::STEP, sharded_layernorm::STEP] {
            let s = Session::sim(p).unwrap();
            (st.run)(&s).unwrap_or_else(|e| panic!("{} at P={p}: {e}", st.name));
        }
    }
    for mode in ["f32", "bf16"] {
        let s = Session::sim(8).unwrap().with_mode(Some(mode.into()));
        (tp_ffn::STEP.run)(&s).unwrap_or_else(|e| panic!("tp_ffn {mode} at P=8: {e}"));
    }
    for p in [6, 8] {
        for mode in ["overlap", "bulk"] {
            let s = Session::sim(p).unwrap().with_mode(Some(mode.into()));
            (allgather_gemm::STEP.run)(&s)
                .unwrap_or_else(|e| panic!("allgather_gemm {mode} at P={p}: {e}"));
            let s = Session::sim(p).unwrap().with_mode(Some(mode.into()));
            (gemm_reduce_scatter::STEP.run)(&s)
                .unwrap_or_else(|e| panic!("gemm_reduce_scatter {mode} at P={p}: {e}"));
        }
        for mode in ["capacity", "dropless"] {
            let s = Session::sim(p).unwrap().with_mode(Some(mode.into()));
            (moe_dispatch_combine::STEP.run)(&s)
                .unwrap_or_else(|e| panic!("moe_dispatch_combine {mode} at P={p}: {e}"));
        }
    }
    for p in 6..=8 {
        (halo_2d::STEP.run)(&Session::sim(p).unwrap())
            .unwrap_or_else(|e| panic!("halo_2d at P={p}: {e}"));
    }
}

/// The capacity rule: pairs past an expert's capacity are dropped in (source rank, token, k)
/// order, recorded as slot -1 and left out of the combine; the counts, slots and kept rows
/// are exact and the outputs bit for bit the golden's, at every capacity.
#[test]
fn moe_drops_pairs_past_the_capacity_in_slot_order() {
    use moe_dispatch_combine::{check, golden, moe, Inputs, CAPACITY, D, EPR, T, TOPK};
    let p = 3;
    let s = Session::sim(p).unwrap();
    let mut inp = Inputs::random(p, 61);
    for capacity in [1, 8, CAPACITY, p * T] {
        let want = golden(p, &inp, capacity);
        let dropped = want.slot.iter().filter(|&&v| v == -1).count();
        // Expected drops: every pair beyond `capacity` at its expert.
        let per_expert: usize = (0..EPR * p)
            .map(|e| {
                let n = inp
                    .route
                    .data()
                    .iter()
                    .filter(|&&v| v as usize == e)
                    .count();
                n.saturating_sub(capacity)
            })
            .sum();
        assert_eq!(dropped, per_expert, "capacity {capacity}");
        assert_eq!(
            dropped == 0,
            capacity == p * T,
            "capacity {capacity}: {dropped} dropped"
        );
        check(&moe(&s, &inp, capacity).unwrap(), &want).unwrap();
    }
    // Every token of every rank to experts 0 and 1: expert 0 takes rank 0's first 40 tokens
    // and nothing else; the rest come back as +0.0 halves.
    let n = inp.route.data().len();
    inp.route =
        eagle::Tensor::from_vec(&[p, T, TOPK], (0..n).map(|i| (i % 2) as i32).collect()).unwrap();
    let got = moe(&s, &inp, CAPACITY).unwrap();
    check(&got, &golden(p, &inp, CAPACITY)).unwrap();
    assert_eq!(&got.kept[..EPR], &[CAPACITY as i32, CAPACITY as i32, 0, 0]);
    assert_eq!(got.slot[2 * (CAPACITY - 1)], CAPACITY as i32 - 1);
    assert_eq!(got.slot[2 * CAPACITY], -1);
    assert!(got.y[CAPACITY * D..].iter().all(|v| v.to_bits() == 0));
    // The check catches a single flipped bit.
    let mut bad = got.clone();
    bad.y[5] = f32::from_bits(bad.y[5].to_bits() ^ 1);
    assert!(matches!(
        check(&bad, &golden(p, &inp, CAPACITY)),
        Err(eagle::Error::Check(_))
    ));
}

/// Bad MoE inputs are errors before anything runs, naming the argument and the fix.
#[test]
fn moe_bad_inputs_are_errors_before_anything_runs() {
    use moe_dispatch_combine::{moe, Inputs, CAPACITY, T, TOPK};
    let p = 2;
    let s = Session::sim(p).unwrap();
    let inp = Inputs::random(p, 61);
    let err = |inp: &Inputs, capacity| match moe(&s, inp, capacity) {
        Err(eagle::Error::Input(m)) => m,
        other => panic!("expected Error::Input, got {other:?}"),
    };
    assert_eq!(
        err(&inp, 0),
        "argument `capacity`: 0 rows per expert would drop every token; give at least 1 (here the mean load is 32 rows per expert, e.g. `capacity = 40`)"
    );
    assert_eq!(
        err(&inp, p * T + 1),
        "argument `capacity`: 129 rows per expert is more than an expert can receive at P = 2 (each of the 128 tokens names it at most once); give at most 128, which already drops nothing"
    );
    // A capacity whose buffer size would overflow is refused the same way.
    assert!(err(&inp, usize::MAX / 2).starts_with("argument `capacity`: "));
    let with = |at: usize, e: i32| {
        let mut r = inp.route.data().to_vec();
        r[at] = e;
        Inputs {
            route: eagle::Tensor::from_vec(&[p, T, TOPK], r).unwrap(),
            ..inp.clone()
        }
    };
    assert_eq!(
        err(&with(2 * T + 7, 8), CAPACITY),
        "argument `route`: route[1][3][1] = 8 names no expert: at P = 2 there are 8 experts (4 per rank), 0 to 7; route each token to experts in that range"
    );
    assert!(err(&with(0, -1), CAPACITY)
        .starts_with("argument `route`: route[0][0][0] = -1 names no expert"));
    let other = inp.route.data()[1];
    assert_eq!(
        err(&with(0, other), CAPACITY),
        format!("argument `route`: token 0 of rank 0 names expert {other} twice (route[0][0] = [{other}, {other}]); the top-2 experts of a token must be distinct")
    );
    // Nothing ran: the session saw no launch.
    assert!(s.take_reports().is_empty());
}

/// A process grid that does not hold the world is an error before anything runs; every
/// factorisation of P gives the serial sweep's bits.
#[test]
fn halo_2d_grid_must_factor_the_world() {
    use halo_2d::{golden, process_grid, sweep, BC, BR};
    let s = Session::sim(6).unwrap();
    match sweep(&s, (4, 2), 3, 71) {
        Err(eagle::Error::Input(m)) => assert_eq!(
            m,
            "argument `grid`: a 4 x 2 process grid has 8 ranks, but the world has 6; give a factorisation of 6, e.g. 2 x 3"
        ),
        other => panic!("expected Error::Input, got {other:?}"),
    }
    assert_eq!(
        (1..=8).map(process_grid).collect::<Vec<_>>(),
        [
            (1, 1),
            (1, 2),
            (1, 3),
            (2, 2),
            (1, 5),
            (2, 3),
            (1, 7),
            (2, 4)
        ]
    );
    for grid in [(1, 6), (6, 1), (3, 2)] {
        let (out, g) = sweep(&s, grid, 7, 71).unwrap();
        let (w, want) = (g.w, golden(g.h, g.w, &g.cells, 7));
        for r in 0..6 {
            let (i0, j0) = (r / grid.1 * BR + 1, r % grid.1 * BC + 1);
            for i in 0..BR {
                eagle_runner::check_bits(
                    &format!("{grid:?} rank {r} row {i}"),
                    &out.data()[(r * BR + i) * BC..(r * BR + i + 1) * BC],
                    &want[(i0 + i) * w + j0..(i0 + i) * w + j0 + BC],
                )
                .unwrap();
            }
        }
    }
}

/// A world size the layout cannot split by is an error before anything runs, naming the
/// argument and the dimension; the runner skips the step there, saying why. Each rank's share
/// of `ffn` is whole blocks of B = 64 columns, so P = 32 (1,024 / 32 = 32 columns) is refused
/// too: before the share's extent was declared in blocks, P = 32 ran no block and returned
/// zeros.
#[test]
fn tp_ffn_at_a_world_size_that_does_not_divide_ffn_is_an_error() {
    for (p, text) in [
        (3, "16 / 3, which is not exact"),
        (32, "16 / 32, which is not exact"),
    ] {
        let e = (tp_ffn::STEP.run)(&Session::sim(p).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "argument `w1`: expected dimension 2 = ((16 / NR) * 64) (with NR = {p})"
            )) && e.contains(text)
                && e.contains("choose extents that divide"),
            "{e}"
        );
        assert_eq!(
            tp_ffn::STEP.world.refuses(p),
            Some(format!(
                "the layout splits `ffn / B` = 16 across ranks; P = {p} does not divide it"
            ))
        );
    }
    assert_eq!(tp_ffn::STEP.world.refuses(16), None);
}

/// Issue 37, item 2: specialization does not duplicate code per rank. The host programs'
/// dispatch loops stay loops and the device programs (hand-written collectives with loops over
/// the ranks, and the built-ins) are the same ops at every P: the specialized IR of steps 08
/// to 11 and 16 has as many lines at P = 512 as at P = 3.
#[test]
fn specialized_programs_do_not_grow_with_the_world_size() {
    type Ir = fn(u64) -> String;
    let steps: [(&str, Ir); 5] = [
        ("08", |p| {
            step08::allreduce_mesh
                .ir_specialized(p, &[("NR", p)])
                .unwrap()
        }),
        ("09", |p| {
            step09::allreduce_two_phase
                .ir_specialized(p, &[("NR", p)])
                .unwrap()
        }),
        ("10", |p| {
            step10::allreduce_ring
                .ir_specialized(p, &[("NR", p)])
                .unwrap()
        }),
        ("11", |p| {
            step11::builtin_ring
                .ir_specialized(p, &[("NR", p)])
                .unwrap()
        }),
        ("16", |p| {
            step16::several.ir_specialized(p, &[("NR", p)]).unwrap()
        }),
    ];
    for (step, ir) in steps {
        // World sizes that leave a ragged split of the 1,000 elements (two chunk lengths,
        // so the same branches at each).
        let lines: Vec<usize> = [3, 64, 512]
            .iter()
            .map(|&p| ir(p).lines().count())
            .collect();
        assert!(
            lines.iter().all(|&n| n == lines[0]),
            "step {step}: specialized IR lines at P = 3, 64, 512: {lines:?}"
        );
    }
}

/// Issue 39 item 4b: `ep_moe` (top-k routing in the kernel, `all_to_all_v` dispatch and
/// combine) equals its golden bit for bit at every P from 1 to 8 at the small size, and at
/// PyPTO's size (T = 128, top-6, D = 4,096, 16 experts per rank, capacity 192) at P = 2, 4, 8.
#[test]
fn ep_moe_matches_its_golden_at_every_p_and_at_pyptos_size() {
    for p in 1..=8 {
        let s = Session::sim(p).unwrap().with_mode(Some("small".into()));
        (ep_moe::STEP.run)(&s).unwrap_or_else(|e| panic!("ep_moe small at P={p}: {e}"));
    }
    for p in [2, 4, 8] {
        let s = Session::sim(p).unwrap().with_mode(Some("pypto".into()));
        (ep_moe::STEP.run)(&s).unwrap_or_else(|e| panic!("ep_moe pypto at P={p}: {e}"));
    }
}

/// `ep_moe`'s capacity rule and counts, with values: at the small size every expert that was
/// sent more than `CAP = 6` rows keeps exactly 6, the received counts are the routing's, the
/// gates of each token are descending and sum to 1 within 1e-6.
#[test]
fn ep_moe_drops_rows_past_the_capacity_and_counts_what_arrives() {
    use ep_moe::{ep_moe, golden, small, Inputs};
    let z = small::SIZE;
    let p = 3;
    let s = Session::sim(p).unwrap();
    let inp = Inputs::random(z, p, 5);
    let got = ep_moe(&s, z, &inp).unwrap();
    assert_eq!(got, golden(z, p, &inp));
    // Rows each expert was sent, from the experts the kernel chose.
    let mut sent = vec![0usize; p * z.epr];
    for &e in &got.expert {
        sent[e as usize] += 1;
    }
    let kept: Vec<usize> = got.kept.iter().map(|&v| v as usize).collect();
    let want: Vec<usize> = sent.iter().map(|&n| n.min(z.cap)).collect();
    assert_eq!(kept, want);
    assert!(
        sent.iter().any(|&n| n > z.cap),
        "no expert overflowed: {sent:?}"
    );
    assert_eq!(got.got.iter().sum::<u64>() as usize, p * z.t * z.k);
    for g in got.gate.chunks(z.k) {
        assert!(
            g[0] >= g[1] && (g.iter().sum::<f32>() - 1.0).abs() < 1e-6,
            "{g:?}"
        );
    }
}

/// `ep_moe`'s router weights must have `EPR * P` columns: another width is an error at
/// launch naming the argument, before anything runs.
#[test]
fn ep_moe_router_weights_of_the_wrong_width_are_an_error_naming_wg() {
    use ep_moe::{ep_moe, small, Inputs};
    let z = small::SIZE;
    let s = Session::sim(2).unwrap();
    let mut inp = Inputs::random(z, 2, 5);
    inp.wg = eagle::Tensor::zeros(&[z.d, z.epr * 2 + 1]);
    let msg = ep_moe(&s, z, &inp).unwrap_err().to_string();
    assert!(
        msg.contains("argument `wg`: expected dimension 1 = (4 * NR) = 8 (with NR = 2), found 9"),
        "{msg}"
    );
}

/// Issue 39 item 4d: `flash_decode` equals its golden bit for bit on every rank at P = 1..8,
/// and stays near an `f64` attention over the whole cache: each output within `2^-18` of its
/// head's largest output in magnitude (measured: see `docs/apps/flash_decode.md`).
#[test]
fn flash_decode_matches_its_golden_at_every_p_and_the_f64_attention() {
    use flash_decode::{golden, reference, run_once, Inputs, DH, H};
    for p in 1..=8 {
        let s = Session::sim(p).unwrap();
        let inp = Inputs::random(p, 83 + p as u64);
        let (out, lse) = run_once(&s, &inp).unwrap();
        let (want, want_lse) = golden(p, &inp);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for r in 0..p {
            assert_eq!(
                bits(&out.data()[r * H * DH..(r + 1) * H * DH]),
                bits(&want),
                "P={p} rank {r}"
            );
            assert_eq!(
                bits(&lse.data()[r * H..(r + 1) * H]),
                bits(&want_lse),
                "P={p} rank {r}"
            );
        }
        let f = reference(p, &inp);
        let mut worst = 0.0f64;
        for h in 0..H {
            let row = &f[h * DH..(h + 1) * DH];
            let scale = row.iter().fold(0.0f64, |a, x| a.max(x.abs()));
            for (g, x) in want[h * DH..(h + 1) * DH].iter().zip(row) {
                worst = worst.max((*g as f64 - x).abs() / scale);
            }
        }
        eprintln!("flash_decode P={p}: largest error {worst:.3e} of the head's largest output");
        assert!(worst < 2f64.powi(-18), "P={p}: {worst:e}");
    }
}

/// Issue 39 item 4e: `fp8_gemm_rs` equals its golden bit for bit in both FP8 formats at every
/// P from 1 to 8, and its result is the `f32` GEMM's up to the quantization: the relative
/// Frobenius error of `C` against the product of the unquantized matrices is below 0.1
/// (`f8e4m3`; measured 0.077) and 0.125 (`f8e5m2`; measured 0.092). The quantizer saturates
/// (some element is the format's largest value): OCP MX's scale `2^(floor(log2(amax)) - emax)`
/// maps a block's largest elements up to `2 * 2^emax`, past E4M3's 448, and clamps them.
#[test]
fn fp8_gemm_rs_matches_its_golden_at_every_p_and_the_f32_gemm_up_to_quantization() {
    use eagle::{f8e4m3, f8e5m2, Float8};
    use fp8_gemm_rs::{golden, matrices, quantize, run_once, Inputs, KP, M, N};
    for p in 1..=8 {
        for mode in ["e4m3", "e5m2"] {
            let s = Session::sim(p).unwrap().with_mode(Some(mode.into()));
            (fp8_gemm_rs::STEP.run)(&s).unwrap_or_else(|e| panic!("{mode} at P={p}: {e}"));
        }
    }
    // Against the f32 product, at P = 2.
    let p = 2;
    let s = Session::sim(p).unwrap();
    fn rel<T: Float8 + Copy>(s: &Session, p: usize, largest: f32, widen: fn(T) -> f32) -> f64 {
        let inp = Inputs::<T>::random(p, 91);
        let c = run_once(s, &inp).unwrap();
        assert_eq!(c.data(), &golden(p, &inp, widen)[..]);
        assert!(inp.a.q.iter().any(|&v| widen(v).abs() == largest));
        // The unquantized inputs `Inputs::random` quantized.
        let rows = p * M;
        let (a, b) = matrices(p, 91);
        // The quantizer is the one `random` used.
        let q = quantize::<T>(&a.data()[..rows * KP], rows, KP, false);
        assert_eq!(q.s, inp.a.s[..rows * (KP / 32)].to_vec());
        let (mut err, mut norm) = (0.0f64, 0.0f64);
        for i in 0..rows {
            for j in 0..N {
                let mut want = 0.0f64;
                for r in 0..p {
                    for k in 0..KP {
                        want += a.data()[(r * rows + i) * KP + k] as f64
                            * b.data()[(r * KP + k) * N + j] as f64;
                    }
                }
                let got = c.data()[((i / M) * M + i % M) * N + j] as f64;
                err += (got - want).powi(2);
                norm += want * want;
            }
        }
        (err / norm).sqrt()
    }
    let e4 = rel::<f8e4m3>(&s, p, 448.0, |v| v.to_f32());
    let e5 = rel::<f8e5m2>(&s, p, 57344.0, |v| v.to_f32());
    eprintln!("fp8_gemm_rs relative error: e4m3 {e4:.4}, e5m2 {e5:.4}");
    assert!(e4 < 0.1 && e5 < 0.125, "e4m3 {e4}, e5m2 {e5}");
}

/// Issue 39 item 4c: `ring_attention` equals its golden bit for bit in both modes (the ring
/// of puts and signals, and the gathers) at every P from 1 to 8, with the race detector on;
/// and it is attention: within `2^-18` of each head's largest output of an `f64` softmax
/// attention over the whole sequence (measured 2.9e-7 to 3.8e-7 at P = 1..8).
#[test]
fn ring_attention_matches_its_golden_in_both_modes_at_every_p_and_the_f64_attention() {
    use ring_attention::{golden, run_once, Inputs, BL, DH, H, HB, SCALE};
    for p in 1..=8 {
        let s = Session::sim(p).unwrap();
        let inp = Inputs::random(p, 97 + p as u64);
        let want = golden(p, &inp);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for overlap in [true, false] {
            let out = run_once(&s, &inp, overlap).unwrap();
            assert_eq!(bits(out.data()), bits(&want), "P={p} overlap={overlap}");
        }
        // The f64 attention of every query row over all P * BL positions.
        let (q, k, v) = (inp.q.data(), inp.k.data(), inp.v.data());
        let at = |b: usize, h: usize, i: usize| (b * HB + h * BL + i) * DH;
        let mut worst = 0.0f64;
        for r in 0..p {
            for h in 0..H {
                let mut rows = Vec::new();
                for i in 0..BL {
                    let s: Vec<f64> = (0..p * BL)
                        .map(|pos| {
                            let (b, j) = (pos / BL, pos % BL);
                            (0..DH)
                                .map(|d| q[at(r, h, i) + d] as f64 * k[at(b, h, j) + d] as f64)
                                .sum::<f64>()
                                * SCALE as f64
                        })
                        .collect();
                    let mx = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
                    let l: f64 = e.iter().sum();
                    for d in 0..DH {
                        let o: f64 = (0..p * BL)
                            .map(|pos| e[pos] * v[at(pos / BL, h, pos % BL) + d] as f64)
                            .sum();
                        rows.push((o / l, want[at(r, h, i) + d] as f64));
                    }
                }
                let scale = rows.iter().fold(0.0f64, |a, (f, _)| a.max(f.abs()));
                for (f, g) in rows {
                    worst = worst.max((g - f).abs() / scale);
                }
            }
        }
        eprintln!("ring_attention P={p}: largest error {worst:.3e} of the head's largest output");
        assert!(worst < 2f64.powi(-18), "P={p}: {worst:e}");
    }
}

/// Issue 39 item 4a: `dp_tp_mlp` equals its golden bit for bit at every P from 1 to 8 and
/// every TP that divides both P and 8, with the race detector on; the ranks of a DP group end
/// with the same weights; the TP split only regroups sums (every grid of the same DP within
/// `1e-6` of TP = 1); and the backward pass is the loss's gradient: `dx` and the SGD step equal
/// central differences of an `f64` loss (relative error below `1e-3`).
#[test]
fn dp_tp_mlp_matches_its_golden_on_every_grid_and_is_the_gradient() {
    use dp_tp_mlp::{golden, run_once, Inputs, D, F, LR, T};
    for p in 1..=8usize {
        for tp in (1..=8).filter(|t| p % t == 0 && 8 % t == 0) {
            let dp = p / tp;
            let s = Session::sim(p).unwrap();
            let inp = Inputs::random(dp, tp, 41 + p as u64).unwrap();
            let got = run_once(&s, &inp, tp).unwrap_or_else(|e| panic!("P={p} TP={tp}: {e}"));
            let want = golden(&inp, dp, tp);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            for (what, g, w) in [
                ("y", &got.y, &want.y),
                ("dx", &got.dx, &want.dx),
                ("w1", &got.w1, &want.w1),
                ("w2", &got.w2, &want.w2),
            ] {
                assert_eq!(bits(g), bits(w), "P={p} TP={tp}: {what}");
            }
            // Replicas of a shard agree (rank r and r + tp hold shard r % tp).
            let ft = F / tp;
            for r in tp..p {
                let shard = |r: usize| &got.w1[r * D * ft..(r + 1) * D * ft];
                assert_eq!(
                    bits(shard(r)),
                    bits(shard(r - tp)),
                    "P={p} TP={tp}: w1 on rank {r}"
                );
            }
            // Against TP = 1 on the same batches and matrices: the same values up to the
            // grouping of the sums over F.
            let one = golden(&Inputs::random(dp, 1, 41 + p as u64).unwrap(), dp, 1);
            for r in 0..p {
                let (i, n) = (r / tp, T * D);
                for (a, b) in got.y[r * n..(r + 1) * n].iter().zip(&one.y[i * n..][..n]) {
                    assert!((a - b).abs() < 1e-6, "P={p} TP={tp}: y {a} vs {b}");
                }
            }
        }
    }
    // The gradient, in f64, at P = 1: dx[e] = dL/dx[e] and w1_new = w1 - LR * dL/dw1.
    let inp = Inputs::random(1, 1, 7).unwrap();
    let out = run_once(&Session::sim(1).unwrap(), &inp, 1).unwrap();
    let w = |t: &eagle::Tensor<f32>| -> Vec<f64> { t.data().iter().map(|&v| v as f64).collect() };
    let (x, tg, w1, w2) = (w(&inp.x), w(&inp.target), w(&inp.w1), w(&inp.w2));
    let loss = |x: &[f64], w1: &[f64]| -> f64 {
        let mut l = 0.0;
        for a in 0..T {
            let mut h = vec![0.0; F];
            for c in 0..F {
                let v: f64 = (0..D).map(|k| x[a * D + k] * w1[k * F + c]).sum();
                let u = 0.797_884_560_802_865_4 * (v + 0.044715 * v * v * v);
                h[c] = 0.5 * v * (1.0 + u.tanh());
            }
            for n in 0..D {
                let y: f64 = (0..F).map(|c| h[c] * w2[c * D + n]).sum();
                l += 0.5 * (y - tg[a * D + n]).powi(2);
            }
        }
        l
    };
    let diff = |f: &dyn Fn(f64) -> f64| (f(1e-4) - f(-1e-4)) / 2e-4;
    let mut worst = 0.0f64;
    for e in [0, 5, 77, T * D - 1] {
        let g = diff(&|d| {
            let mut x2 = x.to_vec();
            x2[e] += d;
            loss(&x2, &w1)
        });
        worst = worst.max((out.dx[e] as f64 - g).abs() / g.abs().max(1e-3));
    }
    for e in [0, 9, 300, D * F - 1] {
        let g = diff(&|d| {
            let mut w2_ = w1.to_vec();
            w2_[e] += d;
            loss(&x, &w2_)
        });
        let step = (w1[e] - out.w1[e] as f64) / LR as f64;
        worst = worst.max((step - g).abs() / g.abs().max(1e-3));
    }
    eprintln!("dp_tp_mlp: largest relative error of the gradient {worst:.3e}");
    assert!(worst < 1e-3, "{worst:e}");
}
