//! Plugins: a compiled sample kernel deployed as a directory, loaded and run later without its
//! source (multi-GPU seed: "Load a compiled kernel").
//!
//! ```text
//! <dir>/manifest.json              {"format": "eagle-plugin/1", "kernels": ["histogram"], ...}
//! <dir>/<name>.json                the sidecar: signature, category, op, world size, targets, hash
//! <dir>/cpu/<name>.eir             the artifact for the CPU target: the plan's IR text,
//!                                  specialized and JIT-compiled again on load
//! <dir>/cuda/<name>.cu             with the cuda target: the CUDA C for the deployed dims
//! <dir>/cuda/<name>.<arch>.ptx     and its PTX per architecture (`compute_90`), used on load
//!                                  instead of NVRTC when a run has the deployed dims
//! ```
//!
//! Sample kernels run at any world size (ranks split samples, not shapes), so one artifact per
//! target serves every world size; the sidecar says so (`"world_size": "any"`).

use crate::ir::{self, parse_module, print_module, verify_module, AccessCategory};
use crate::plan::{plan_module, Plan, Structure};
use crate::{codegen, Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

const FORMAT: &str = "eagle-plugin/1";

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always `eagle-plugin/1`.
    pub format: String,
    /// The eagle version that wrote it.
    pub eagle_version: String,
    /// Kernel names; each has a sidecar `<name>.json`.
    pub kernels: Vec<String>,
}

/// One plane of a kernel's signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlaneSig {
    /// Parameter name.
    pub name: String,
    /// `f64`, `f32`, ...
    pub dtype: String,
    /// Dims as text (`"N"`, `"2"`).
    pub shape: Vec<String>,
    /// Written by the kernel.
    pub out: bool,
}

/// The sidecar `<name>.json` of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sidecar {
    /// Kernel name.
    pub name: String,
    /// Planes after the sample index, in order.
    pub signature: Vec<PlaneSig>,
    /// `sample_local`, `cross_sample_read`, `cross_sample_write` or `mapreduce(op)`.
    pub category: String,
    /// The reduction op of a mapreduce (`sum`, `times`, `max`, `land`), else `null`.
    pub op: Option<String>,
    /// World sizes the artifacts serve: `"any"` for sample kernels.
    pub world_size: String,
    /// Targets with an artifact.
    pub targets: Vec<String>,
    /// `fnv1a:<hex>` of the artifact text.
    pub content_hash: String,
    /// The cuda target's artifact, when deployed with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaSidecar>,
}

/// The cuda part of a sidecar: the dims the CUDA C was specialized for and its PTX.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CudaSidecar {
    /// Symbolic dims and their values (`{"N": 200000}`).
    pub dims: std::collections::BTreeMap<String, u64>,
    /// Virtual architectures with a PTX file.
    pub archs: Vec<String>,
    /// `fnv1a:<hex>` of `cuda/<name>.cu`.
    pub source_hash: String,
}

/// What [`deploy_with`] writes besides the CPU artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployOptions {
    /// Also deploy the cuda target, specialized for these dims (`[("N", 200000)]`).
    pub cuda_dims: Vec<(String, u64)>,
    /// Architectures to carry PTX for (`["compute_80", "compute_90"]`); needs NVRTC.
    pub cuda_archs: Vec<String>,
}

fn hash_of(text: &str) -> String {
    format!("fnv1a:{:016x}", codegen::fnv1a(text.as_bytes()))
}

fn io(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Usage(format!("plugin: {what} `{}`: {e}", path.display()))
}

fn field(name: &str, expected: impl std::fmt::Display, found: impl std::fmt::Display) -> Error {
    Error::Usage(format!(
        "plugin sidecar field `{name}`: expected {expected}, found {found}; the plugin was modified or does not match its artifact: deploy it again"
    ))
}

fn signature(plan: &Plan) -> Vec<PlaneSig> {
    let f = plan.module().function(plan.kernel());
    f.map(|f| {
        f.params[1..]
            .iter()
            .map(|p| {
                let t = f.ty(p.value);
                PlaneSig {
                    name: p.name.clone(),
                    dtype: t.dtype().map_or("?", |d| d.name()).to_string(),
                    shape: t
                        .shape()
                        .map_or(vec![], |s| s.0.iter().map(|d| d.to_string()).collect()),
                    out: p.out,
                }
            })
            .collect()
    })
    .unwrap_or_default()
}

/// Writes `plan`'s kernel to `dir` (created if needed) as a plugin: manifest, sidecar and the
/// CPU artifact. Deploying into a directory that holds other kernels adds to its manifest.
///
/// # Errors
/// [`Error::Usage`] naming the path on an I/O failure.
pub fn deploy(plan: &Plan, dir: &Path) -> Result<()> {
    deploy_with(plan, dir, &DeployOptions::default())
}

/// The CUDA C of `plan`'s kernel specialized for `dims`.
fn cuda_source(plan: &Plan, dims: &[(String, u64)]) -> Result<codegen::cuda::CudaCode> {
    let dims: Vec<(&str, u64)> = dims.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    plan.cuda_code(&dims)
}

/// [`deploy`], and with `opts.cuda_archs` non-empty also the cuda target: the CUDA C for
/// `opts.cuda_dims` and its PTX for each architecture (compiled by NVRTC now, so the machine
/// that loads the plugin needs no NVRTC for runs with those dims).
///
/// # Errors
/// As [`deploy`]; codegen errors for dims that do not specialize the kernel
/// ([`codegen::CodegenError::NvrtcUnavailable`] without NVRTC).
pub fn deploy_with(plan: &Plan, dir: &Path, opts: &DeployOptions) -> Result<()> {
    let name = plan.kernel().to_string();
    let mut targets = vec!["cpu".to_string()];
    let mut cuda = None;
    if !opts.cuda_archs.is_empty() {
        let code = cuda_source(plan, &opts.cuda_dims)?;
        std::fs::create_dir_all(dir.join("cuda")).map_err(|e| io("cannot create", dir, e))?;
        let cu = dir.join("cuda").join(format!("{name}.cu"));
        std::fs::write(&cu, &code.source).map_err(|e| io("cannot write", &cu, e))?;
        for arch in &opts.cuda_archs {
            let ptx = codegen::cuda::compile_ptx(&code, arch)?;
            let pp = dir.join("cuda").join(format!("{name}.{arch}.ptx"));
            std::fs::write(&pp, ptx.as_bytes()).map_err(|e| io("cannot write", &pp, e))?;
        }
        targets.push("cuda".into());
        cuda = Some(CudaSidecar {
            dims: opts.cuda_dims.iter().cloned().collect(),
            archs: opts.cuda_archs.clone(),
            source_hash: hash_of(&code.source),
        });
    }
    std::fs::create_dir_all(dir.join("cpu")).map_err(|e| io("cannot create", dir, e))?;
    let text = print_module(plan.module());
    let art = dir.join("cpu").join(format!("{name}.eir"));
    std::fs::write(&art, &text).map_err(|e| io("cannot write", &art, e))?;
    let category = plan.category();
    let sidecar = Sidecar {
        name: name.clone(),
        signature: signature(plan),
        category: category.to_string(),
        op: match category {
            AccessCategory::Mapreduce(k) => Some(k.name().to_string()),
            _ => None,
        },
        world_size: "any".into(),
        targets,
        content_hash: hash_of(&text),
        cuda,
    };
    let sc = dir.join(format!("{name}.json"));
    let json = serde_json::to_string_pretty(&sidecar).map_err(|e| io("cannot encode", &sc, e))?;
    std::fs::write(&sc, json).map_err(|e| io("cannot write", &sc, e))?;
    let mp = dir.join("manifest.json");
    let mut manifest = match std::fs::read_to_string(&mp) {
        Ok(t) => serde_json::from_str::<Manifest>(&t).map_err(|e| io("cannot read", &mp, e))?,
        Err(_) => Manifest {
            format: FORMAT.into(),
            eagle_version: env!("CARGO_PKG_VERSION").into(),
            kernels: vec![],
        },
    };
    if !manifest.kernels.contains(&name) {
        manifest.kernels.push(name);
    }
    let json = serde_json::to_string_pretty(&manifest).map_err(|e| io("cannot encode", &mp, e))?;
    std::fs::write(&mp, json).map_err(|e| io("cannot write", &mp, e))
}

/// A kernel loaded from a plugin, ready to plan.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Kernel name.
    pub name: String,
    /// Its sidecar.
    pub sidecar: Sidecar,
    module: ir::Module,
}

impl Loaded {
    /// Plans the loaded kernel (see [`crate::plan::plan`]).
    ///
    /// # Errors
    /// As [`crate::plan::plan`].
    pub fn plan(&self, structure: Structure, inner: Structure) -> Result<Plan> {
        plan_module(&self.module, &self.name, structure, inner)
    }
}

/// Checks the cuda artifact of a loaded kernel (its CUDA C must be what the IR gives for the
/// deployed dims) and hands its PTX to the PTX cache, so runs with those dims skip NVRTC.
fn load_cuda(loaded: &Loaded, dir: &Path, c: &CudaSidecar) -> Result<()> {
    let name = &loaded.name;
    let cu = dir.join("cuda").join(format!("{name}.cu"));
    let source = std::fs::read_to_string(&cu).map_err(|e| io("cannot read", &cu, e))?;
    let h = hash_of(&source);
    if h != c.source_hash {
        return Err(field(
            "cuda.source_hash",
            format!("`{h}` (the hash of cuda/{name}.cu)"),
            format!("`{}`", c.source_hash),
        ));
    }
    let plan = loaded.plan(Structure::HostTeam, Structure::HostTeam)?;
    let dims: Vec<(String, u64)> = c.dims.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let code = cuda_source(&plan, &dims)?;
    if code.source != source {
        return Err(field(
            "cuda.dims",
            format!("dims whose CUDA C is cuda/{name}.cu"),
            format!("{:?} (the IR gives different CUDA C for them)", c.dims),
        ));
    }
    for arch in &c.archs {
        let pp = dir.join("cuda").join(format!("{name}.{arch}.ptx"));
        let ptx = std::fs::read_to_string(&pp).map_err(|e| io("cannot read", &pp, e))?;
        codegen::cuda::preload_ptx(&code, arch, &ptx);
    }
    Ok(())
}

/// Loads kernel `name` from plugin directory `dir`, checking the manifest, the sidecar and the
/// artifact against each other.
///
/// # Errors
/// [`Error::Usage`] for a missing file, a kernel not in the manifest, an unknown format, or a
/// sidecar that does not match its artifact, naming the field (`content_hash`, `category`,
/// `op`, `signature`, `targets`, `name`); IR errors for an artifact that does not parse.
pub fn load(dir: &Path, name: &str) -> Result<Loaded> {
    let mp = dir.join("manifest.json");
    let text = std::fs::read_to_string(&mp).map_err(|e| io("cannot read", &mp, e))?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| io("malformed", &mp, e))?;
    if manifest.format != FORMAT {
        return Err(Error::Usage(format!(
            "plugin manifest field `format`: expected `{FORMAT}`, found `{}`",
            manifest.format
        )));
    }
    if !manifest.kernels.iter().any(|k| k == name) {
        return Err(Error::Usage(format!(
            "plugin `{}` has no kernel `{name}`; it has {:?}",
            dir.display(),
            manifest.kernels
        )));
    }
    let sp = dir.join(format!("{name}.json"));
    let st = std::fs::read_to_string(&sp).map_err(|e| io("cannot read", &sp, e))?;
    let sidecar: Sidecar = serde_json::from_str(&st).map_err(|e| io("malformed", &sp, e))?;
    if sidecar.name != name {
        return Err(field(
            "name",
            format!("`{name}`"),
            format!("`{}`", sidecar.name),
        ));
    }
    if !sidecar.targets.iter().any(|t| t == "cpu") {
        return Err(field(
            "targets",
            "a list with \"cpu\"",
            format!("{:?}", sidecar.targets),
        ));
    }
    let ap = dir.join("cpu").join(format!("{name}.eir"));
    let art = std::fs::read_to_string(&ap).map_err(|e| io("cannot read", &ap, e))?;
    let h = hash_of(&art);
    if h != sidecar.content_hash {
        return Err(field(
            "content_hash",
            format!("`{h}` (the hash of cpu/{name}.eir)"),
            format!("`{}`", sidecar.content_hash),
        ));
    }
    let module = parse_module(&art)?;
    verify_module(&module)?;
    let f = module.function(name).ok_or_else(|| {
        field(
            "name",
            format!("a function `{name}` in the artifact"),
            "none",
        )
    })?;
    let category = ir::access_category(f)?.category;
    if category.to_string() != sidecar.category {
        return Err(field(
            "category",
            format!("`{category}` (inferred from the artifact)"),
            format!("`{}`", sidecar.category),
        ));
    }
    let op = match category {
        AccessCategory::Mapreduce(k) => Some(k.name().to_string()),
        _ => None,
    };
    if op != sidecar.op {
        return Err(field("op", format!("{op:?}"), format!("{:?}", sidecar.op)));
    }
    let loaded = Loaded {
        name: name.to_string(),
        sidecar,
        module,
    };
    if let Some(c) = &loaded.sidecar.cuda {
        load_cuda(&loaded, dir, c)?;
    }
    let plan = loaded.plan(Structure::HostTeam, Structure::HostTeam)?;
    let sig = signature(&plan);
    if sig != loaded.sidecar.signature {
        return Err(field(
            "signature",
            format!("{sig:?}"),
            format!("{:?}", loaded.sidecar.signature),
        ));
    }
    Ok(loaded)
}
