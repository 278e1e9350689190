//! Host programs deployed as plugins (`eagle::plugin::deploy_host` / `load_host`): launched
//! without their source at any world size, with the bits of the direct launch; a modified
//! plugin is refused naming the field.

mod tutorial;
use tutorial::*;

use eagle::plugin::{deploy_host, load_host};
use eagle::prelude::*;

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_deployed_host_program_runs_at_every_world_size_with_the_direct_bits() {
    let d = dir("host-plugin-barrier");
    deploy_host(step04::barrier_step, &d).unwrap();
    let loaded = load_host(&d, "barrier_step").unwrap();
    let names: Vec<&str> = loaded
        .sidecar
        .params
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["x", "y", "builtin"]);
    assert_eq!(loaded.sidecar.params[1].shape, ["NR", "1", "64"]);
    assert!(loaded.sidecar.params[1].out && !loaded.sidecar.params[0].out);
    for p in [1, 2, 3, 5] {
        let s = Session::sim(p).unwrap();
        let x = eagle_runner::random_tensor(&[p, 1, 64], 4);
        let mut direct = Tensor::<f32>::zeros(&[p, 1, 64]);
        step04::barrier_step
            .launch(&s, &x, &mut direct, false)
            .unwrap();
        let mut y = Tensor::<f32>::zeros(&[p, 1, 64]);
        let args = vec![
            eagle::Arg::from(&x),
            eagle::Arg::from(&mut y),
            eagle::Arg::from(false),
        ];
        loaded.launch(&s, args).unwrap();
        let bits = |t: &Tensor<f32>| t.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&y), bits(&direct), "P = {p}");
    }
}

#[test]
fn a_modified_or_missing_host_program_is_refused_by_name() {
    let d = dir("host-plugin-tampered");
    deploy_host(step04::barrier_step, &d).unwrap();
    let e = load_host(&d, "nope").unwrap_err().to_string();
    assert!(
        e.contains("has no host program `nope`; it has [\"barrier_step\"]"),
        "{e}"
    );
    let art = d.join("host").join("barrier_step.eir");
    let text = std::fs::read_to_string(&art).unwrap();
    std::fs::write(&art, format!("{text}\n")).unwrap();
    let e = load_host(&d, "barrier_step").unwrap_err().to_string();
    assert!(e.starts_with("plugin sidecar field `content_hash`"), "{e}");
    // A sample kernel is not a host program.
    let e = deploy_host(step04::signal_barrier, &d)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`signal_barrier` is not a host function"), "{e}");
}
