//! The tutorial steps 01-16 (the examples), shared by the integration tests that run them.
#![allow(dead_code)]

#[path = "../../examples/01_hello_rank.rs"]
pub mod step01;
#[path = "../../examples/02_three_levels.rs"]
pub mod step02;
#[path = "../../examples/03_window_buffer.rs"]
pub mod step03;
#[path = "../../examples/04_barrier.rs"]
pub mod step04;
#[path = "../../examples/05_remote_load_store.rs"]
pub mod step05;
#[path = "../../examples/06_put_get.rs"]
pub mod step06;
#[path = "../../examples/07_dynamic_rank_count.rs"]
pub mod step07;
#[path = "../../examples/08_allreduce_mesh.rs"]
pub mod step08;
#[path = "../../examples/09_allreduce_two_phase.rs"]
pub mod step09;
#[path = "../../examples/10_allreduce_ring.rs"]
pub mod step10;
#[path = "../../examples/11_builtin_allreduce.rs"]
pub mod step11;
#[path = "../../examples/12_broadcast.rs"]
pub mod step12;
#[path = "../../examples/13_allgather.rs"]
pub mod step13;
#[path = "../../examples/14_reduce_scatter.rs"]
pub mod step14;
#[path = "../../examples/15_all_to_all.rs"]
pub mod step15;
#[path = "../../examples/16_several_collectives.rs"]
pub mod step16;

#[path = "../../examples/allgather_gemm.rs"]
pub mod allgather_gemm;
#[path = "../../examples/dp_tp_mlp.rs"]
pub mod dp_tp_mlp;
#[path = "../../examples/ep_moe.rs"]
pub mod ep_moe;
#[path = "../../examples/flash_decode.rs"]
pub mod flash_decode;
#[path = "../../examples/fp8_gemm_rs.rs"]
pub mod fp8_gemm_rs;
#[path = "../../examples/gelu.rs"]
pub mod gelu;
#[path = "../../examples/gemm_reduce_scatter.rs"]
pub mod gemm_reduce_scatter;
#[path = "../../examples/halo_2d.rs"]
pub mod halo_2d;
#[path = "../../examples/layernorm.rs"]
pub mod layernorm;
#[path = "../../examples/log_softmax.rs"]
pub mod log_softmax;
#[path = "../../examples/matmul.rs"]
pub mod matmul;
#[path = "../../examples/moe_dispatch_combine.rs"]
pub mod moe_dispatch_combine;
#[path = "../../examples/ring_attention.rs"]
pub mod ring_attention;
#[path = "../../examples/rotary.rs"]
pub mod rotary;
#[path = "../../examples/sharded_layernorm.rs"]
pub mod sharded_layernorm;
#[path = "../../examples/sharded_softmax.rs"]
pub mod sharded_softmax;
#[path = "../../examples/softmax.rs"]
pub mod softmax;
#[path = "../../examples/tp_ffn.rs"]
pub mod tp_ffn;

/// Every step, then the tile-algebra kernels (softmax, layernorm, matmul), the
/// math-library kernels (gelu, log_softmax, rotary) and the distributed programs
/// (sharded_softmax, sharded_layernorm, tp_ffn, allgather_gemm, gemm_reduce_scatter,
/// moe_dispatch_combine, halo_2d, ep_moe, flash_decode, fp8_gemm_rs, ring_attention, dp_tp_mlp).
pub fn steps() -> Vec<eagle_runner::Step> {
    vec![
        step01::STEP,
        step02::STEP,
        step03::STEP,
        step04::STEP,
        step05::STEP,
        step06::STEP,
        step07::STEP,
        step08::STEP,
        step09::STEP,
        step10::STEP,
        step11::STEP,
        step12::STEP,
        step13::STEP,
        step14::STEP,
        step15::STEP,
        step16::STEP,
        softmax::STEP,
        layernorm::STEP,
        matmul::STEP,
        gelu::STEP,
        log_softmax::STEP,
        rotary::STEP,
        sharded_softmax::STEP,
        sharded_layernorm::STEP,
        tp_ffn::STEP,
        allgather_gemm::STEP,
        gemm_reduce_scatter::STEP,
        moe_dispatch_combine::STEP,
        halo_2d::STEP,
        ep_moe::STEP,
        flash_decode::STEP,
        fp8_gemm_rs::STEP,
        ring_attention::STEP,
        dp_tp_mlp::STEP,
    ]
}

/// The modes of `st` (`[None]` for a step without modes).
pub fn modes(st: &eagle_runner::Step) -> Vec<Option<String>> {
    st.each_mode()
        .into_iter()
        .map(|m| m.map(str::to_string))
        .collect()
}
