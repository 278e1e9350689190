//! Pipeline benchmarks: compile time of step 07 at P = 4 (cold and cached), and one launch of
//! every tutorial step at P = 4 (what the runner does).
//!
//! `cargo bench --bench pipeline`

use criterion::{criterion_group, criterion_main, Criterion};
use eagle::codegen::{self, Bindings, Target};
use eagle::ir::EagleFn;

#[path = "../examples/07_dynamic_rank_count.rs"]
#[allow(dead_code)]
mod step07;

macro_rules! steps {
    ($($m:ident = $path:literal),* $(,)?) => {
        $(
            #[allow(dead_code)]
            #[path = $path]
            mod $m;
        )*
        fn all_steps() -> Vec<eagle_runner::Step> {
            vec![$($m::STEP),*]
        }
    };
}

steps! {
    s01 = "../examples/01_hello_rank.rs",
    s02 = "../examples/02_three_levels.rs",
    s03 = "../examples/03_window_buffer.rs",
    s04 = "../examples/04_barrier.rs",
    s05 = "../examples/05_remote_load_store.rs",
    s06 = "../examples/06_put_get.rs",
}

fn compile(c: &mut Criterion) {
    let m = step07::ring_get::module().expect("step 07 builds");
    let b = Bindings::world(4).with("NR", 4);
    c.bench_function("compile step07 P=4 cold", |bench| {
        bench.iter(|| {
            codegen::clear_cache();
            codegen::compile(&m, "ring_get", &b, Target::Cpu).expect("compiles")
        })
    });
    c.bench_function("compile step07 P=4 cached", |bench| {
        bench.iter(|| codegen::compile(&m, "ring_get", &b, Target::Cpu).expect("compiles"))
    });
}

fn runner(c: &mut Criterion) {
    let mut steps = all_steps();
    steps.push(step07::STEP);
    c.bench_function("runner all steps P=4 (warm cache)", |bench| {
        bench.iter(|| {
            for st in &steps {
                for mode in st.each_mode() {
                    let s = eagle::Session::sim(4)
                        .expect("session")
                        .with_mode(mode.map(str::to_string));
                    (st.run)(&s).expect("step passes");
                }
            }
        })
    });
}

criterion_group!(benches, compile, runner);
criterion_main!(benches);
