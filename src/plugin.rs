//! Plugins: a compiled sample kernel deployed as a directory, loaded and run later without its
//! source (multi-GPU seed: "Load a compiled kernel").
//!
//! ```text
//! <dir>/manifest.json              {"format": "eagle-plugin/2", "kernels": ["histogram"], ...}
//! <dir>/<name>.json                the sidecar: signature, category, op, world size, targets, hash
//! <dir>/cpu/<name>.eir             the artifact for the CPU target: the plan's IR text,
//!                                  specialized and JIT-compiled again on load
//! <dir>/cuda/<name>.cu             with the cuda target: the CUDA C for the deployed dims
//! <dir>/cuda/<name>.<arch>.ptx     and its PTX per architecture (`compute_90`), used on load
//!                                  instead of NVRTC when a run has the deployed dims
//! <dir>/<name>.host.json           a host program's sidecar (`deploy_host`): its parameters
//!                                  and the hash of its module
//! <dir>/host/<name>.eir            the host program's generic module (every function it
//!                                  reaches), specialized for each world size when launched
//! ```
//!
//! Sample kernels run at any world size (ranks split samples, not shapes), so one artifact per
//! target serves every world size; the sidecar says so (`"world_size": "any"`).
//!
//! [`load`] checks every field of the manifest and the sidecar against the artifacts and
//! against this eagle, reads only regular files of at most [`MAX_FILE_BYTES`], and checks the
//! SHA-256 of every artifact. The hashes are an integrity check (against accidental edits,
//! truncation and stale files), not authentication: whoever can write the directory can
//! rewrite an artifact and its hash together.

use crate::ir::{self, parse_module, print_module, verify_module, AccessCategory};
use crate::plan::{Plan, Structure};
use crate::{codegen, Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

mod host;
pub use host::{deploy_host, load_host, HostSidecar, LoadedHost};

/// The format this eagle writes and reads (`/2`: SHA-256 hashes, PTX hashes).
const FORMAT: &str = "eagle-plugin/2";

/// The most bytes [`load`] reads from any one file of a plugin (64 MiB); a larger file is
/// refused.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// `manifest.json`. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always `eagle-plugin/2`.
    pub format: String,
    /// The eagle version that wrote it; [`load`] accepts only its own version.
    pub eagle_version: String,
    /// Kernel names; each has a sidecar `<name>.json`.
    pub kernels: Vec<String>,
    /// Host program names ([`deploy_host`]); each has a sidecar `<name>.host.json`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// One plane of a kernel's signature.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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

/// The sidecar `<name>.json` of one kernel. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sidecar {
    /// Kernel name.
    pub name: String,
    /// Planes after the sample index, in order.
    pub signature: Vec<PlaneSig>,
    /// `sample_local`, `cross_sample_read`, `cross_sample_write` or `mapreduce(op)`.
    pub category: String,
    /// The reduction op of a mapreduce (`sum`, `times`, `max`, `land`), else `null`.
    pub op: Option<String>,
    /// World sizes the artifacts serve: `"any"` for sample kernels (the only value written).
    pub world_size: String,
    /// Targets with an artifact: `["cpu"]`, or `["cpu", "cuda"]` with a [`Sidecar::cuda`] part.
    pub targets: Vec<String>,
    /// `sha256:<hex>` of the artifact text (an integrity check, not authentication).
    pub content_hash: String,
    /// The cuda target's artifact, when deployed with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<CudaSidecar>,
}

/// The cuda part of a sidecar: the dims the CUDA C was specialized for and its PTX.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CudaSidecar {
    /// Symbolic dims and their values (`{"N": 200000}`).
    pub dims: std::collections::BTreeMap<String, u64>,
    /// Virtual architectures with a PTX file.
    pub archs: Vec<String>,
    /// `sha256:<hex>` of `cuda/<name>.cu`.
    pub source_hash: String,
    /// `sha256:<hex>` of each architecture's PTX file, in the order of `archs`.
    pub ptx_hashes: Vec<String>,
}

/// What [`deploy_with`] writes besides the CPU artifact.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeployOptions {
    /// Also deploy the cuda target, specialized for these dims (`[("N", 200000)]`).
    pub cuda_dims: Vec<(String, u64)>,
    /// Architectures to carry PTX for (`["compute_80", "compute_90"]`); needs NVRTC.
    pub cuda_archs: Vec<String>,
}

/// `sha256:<hex>` of `text`.
fn hash_of(text: &str) -> String {
    let d = Sha256::digest(text.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The text of plugin file `path`: a regular file (symlinks are followed; a FIFO, device,
/// socket or directory is refused before it is opened) of at most [`MAX_FILE_BYTES`], in UTF-8.
fn read_text(path: &Path) -> Result<String> {
    let refuse = |found: String| {
        Error::Plugin(format!(
            "plugin: cannot read `{}`: expected a regular file of at most {MAX_FILE_BYTES} bytes, found {found}; deploy the plugin again",
            path.display()
        ))
    };
    let kind = |m: &std::fs::Metadata| {
        let t = m.file_type();
        if t.is_dir() {
            "a directory".to_string()
        } else if t.is_file() {
            format!("a file of {} bytes", m.len())
        } else {
            "a special file (FIFO, socket or device)".to_string()
        }
    };
    let meta = std::fs::metadata(path).map_err(|e| io("cannot read", path, e))?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return Err(refuse(kind(&meta)));
    }
    let file = std::fs::File::open(path).map_err(|e| io("cannot read", path, e))?;
    // The path may have changed since it was checked: check what was opened, too.
    let meta = file.metadata().map_err(|e| io("cannot read", path, e))?;
    if !meta.is_file() {
        return Err(refuse(kind(&meta)));
    }
    let mut bytes = vec![];
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io("cannot read", path, e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(refuse(format!("more than {MAX_FILE_BYTES} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| io("cannot read", path, e))
}

fn io(what: &str, path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Plugin(format!("plugin: {what} `{}`: {e}", path.display()))
}

fn field(name: &str, expected: impl std::fmt::Display, found: impl std::fmt::Display) -> Error {
    Error::Plugin(format!(
        "plugin sidecar field `{name}`: expected {expected}, found {found}; the plugin was modified or does not match its artifact: deploy it again"
    ))
}

fn signature(plan: &Plan) -> Vec<PlaneSig> {
    plan.module()
        .function(plan.kernel())
        .map(|f| param_sigs(f, &f.params[1..]))
        .unwrap_or_default()
}

/// `params` of `f` as a sidecar lists them: name, dtype, dims as text (none for a scalar) and
/// whether the function writes it.
fn param_sigs(f: &ir::Function, params: &[ir::Param]) -> Vec<PlaneSig> {
    params
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
}

/// Writes `plan`'s kernel to `dir` (created if needed) as a plugin: manifest, sidecar and the
/// CPU artifact. Deploying into a directory that holds other kernels adds to its manifest.
///
/// # Errors
/// [`Error::Plugin`] naming the path on an I/O failure.
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
        let mut ptx_hashes = vec![];
        for arch in &opts.cuda_archs {
            let ptx = codegen::cuda::compile_ptx(&code, arch)?;
            let pp = dir.join("cuda").join(format!("{name}.{arch}.ptx"));
            std::fs::write(&pp, ptx.as_bytes()).map_err(|e| io("cannot write", &pp, e))?;
            ptx_hashes.push(hash_of(&ptx));
        }
        targets.push("cuda".into());
        cuda = Some(CudaSidecar {
            dims: opts.cuda_dims.iter().cloned().collect(),
            archs: opts.cuda_archs.clone(),
            source_hash: hash_of(&code.source),
            ptx_hashes,
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
    let mut manifest = manifest_to_update(dir)?;
    if !manifest.kernels.contains(&name) {
        manifest.kernels.push(name);
    }
    write_manifest(dir, &manifest)
}

/// The manifest of `dir` to add to: the one there (checked), or a new one.
fn manifest_to_update(dir: &Path) -> Result<Manifest> {
    let mp = dir.join("manifest.json");
    if mp.exists() {
        return read_manifest(dir);
    }
    Ok(Manifest {
        format: FORMAT.into(),
        eagle_version: env!("CARGO_PKG_VERSION").into(),
        kernels: vec![],
        hosts: vec![],
    })
}

/// The manifest of `dir`, read and checked ([`check_manifest`]).
fn read_manifest(dir: &Path) -> Result<Manifest> {
    let mp = dir.join("manifest.json");
    let text = read_text(&mp)?;
    let manifest: Manifest = serde_json::from_str(&text).map_err(|e| io("malformed", &mp, e))?;
    check_manifest(&manifest)?;
    Ok(manifest)
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<()> {
    let mp = dir.join("manifest.json");
    let json = serde_json::to_string_pretty(manifest).map_err(|e| io("cannot encode", &mp, e))?;
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
        let declared = AccessCategory::parse(&self.sidecar.category);
        crate::plan::plan_declared(&self.module, &self.name, declared, structure, inner)
    }
}

/// The kernels of the plugin in `dir`, as its manifest lists them (see [`load`] for the
/// checks made when one is loaded).
///
/// # Errors
/// [`Error::Plugin`] for a missing or malformed `manifest.json`, or one of another format or
/// eagle version.
pub fn kernels(dir: &Path) -> Result<Vec<String>> {
    let manifest = read_manifest(dir)?;
    Ok(manifest.kernels)
}

/// The host programs of the plugin in `dir` ([`deploy_host`]), as its manifest lists them.
///
/// # Errors
/// As [`kernels`].
pub fn host_programs(dir: &Path) -> Result<Vec<String>> {
    let manifest = read_manifest(dir)?;
    Ok(manifest.hosts)
}

/// Checks the cuda artifact of a loaded kernel (its CUDA C must be what the IR gives for the
/// deployed dims) and hands its PTX to the PTX cache, so runs with those dims skip NVRTC.
fn load_cuda(loaded: &Loaded, dir: &Path, c: &CudaSidecar) -> Result<()> {
    let name = &loaded.name;
    let cu = dir.join("cuda").join(format!("{name}.cu"));
    let source = read_text(&cu)?;
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
    if c.archs.is_empty() || c.archs.len() != c.ptx_hashes.len() {
        return Err(field(
            "cuda.ptx_hashes",
            format!("one hash per architecture of `cuda.archs` {:?}", c.archs),
            format!("{} hash(es)", c.ptx_hashes.len()),
        ));
    }
    let mut ptxs = vec![];
    for (i, (arch, want)) in c.archs.iter().zip(&c.ptx_hashes).enumerate() {
        if c.archs[..i].contains(arch) || !is_arch(arch) {
            return Err(field(
                "cuda.archs",
                "distinct virtual architectures such as `compute_90`",
                format!("{:?}", c.archs),
            ));
        }
        let pp = dir.join("cuda").join(format!("{name}.{arch}.ptx"));
        let ptx = read_text(&pp)?;
        let h = hash_of(&ptx);
        if h != *want {
            return Err(field(
                &format!("cuda.ptx_hashes[{i}]"),
                format!("`{h}` (the hash of cuda/{name}.{arch}.ptx)"),
                format!("`{want}`"),
            ));
        }
        ptxs.push((arch, ptx));
    }
    // Only a fully checked plugin reaches the PTX cache.
    for (arch, ptx) in ptxs {
        codegen::cuda::preload_ptx(&code, arch, &ptx);
    }
    Ok(())
}

/// Whether `a` is a virtual architecture name: `compute_` and digits.
fn is_arch(a: &str) -> bool {
    a.strip_prefix("compute_")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Checks the manifest's format, version and kernel list.
fn check_manifest(m: &Manifest) -> Result<()> {
    let bad = |name: &str, expected: String, found: String| {
        Error::Plugin(format!(
            "plugin manifest field `{name}`: expected {expected}, found {found}; deploy the plugin again with this eagle"
        ))
    };
    if m.format != FORMAT {
        return Err(bad(
            "format",
            format!("`{FORMAT}`"),
            format!("`{}`", m.format),
        ));
    }
    let version = env!("CARGO_PKG_VERSION");
    if m.eagle_version != version {
        return Err(bad(
            "eagle_version",
            format!("`{version}` (this eagle)"),
            format!("`{}`", m.eagle_version),
        ));
    }
    for (field, names) in [("kernels", &m.kernels), ("hosts", &m.hosts)] {
        for (i, k) in names.iter().enumerate() {
            if names[..i].contains(k) {
                return Err(bad(
                    field,
                    "each name once".into(),
                    format!("`{k}` twice in {names:?}"),
                ));
            }
            // Names become file names: a function name, never a path (`../x`).
            let ident = k
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ident {
                return Err(bad(
                    field,
                    "function names (letters, digits and `_`)".into(),
                    format!("`{k}`"),
                ));
            }
        }
    }
    Ok(())
}

/// Loads kernel `name` from plugin directory `dir`, checking every field of the manifest and
/// the sidecar against the artifacts and against this eagle, and the SHA-256 of every
/// artifact (an integrity check, not authentication). Reads only regular files of at most
/// [`MAX_FILE_BYTES`] bytes.
///
/// # Errors
/// [`Error::Plugin`] for a missing, special (FIFO, device) or oversized file, a kernel not in
/// the manifest, another format or eagle version, an unknown field, or a sidecar that does not
/// match its artifact, naming the field (`content_hash`, `category`, `op`, `signature`,
/// `targets`, `world_size`, `name`, `cuda.*`); IR errors for an artifact that does not parse.
pub fn load(dir: &Path, name: &str) -> Result<Loaded> {
    let manifest = read_manifest(dir)?;
    if !manifest.kernels.iter().any(|k| k == name) {
        return Err(Error::Plugin(format!(
            "plugin `{}` has no kernel `{name}`; it has {:?}",
            dir.display(),
            manifest.kernels
        )));
    }
    let sp = dir.join(format!("{name}.json"));
    let st = read_text(&sp)?;
    let sidecar: Sidecar = serde_json::from_str(&st).map_err(|e| io("malformed", &sp, e))?;
    if sidecar.name != name {
        return Err(field(
            "name",
            format!("`{name}`"),
            format!("`{}`", sidecar.name),
        ));
    }
    if sidecar.world_size != "any" {
        return Err(field(
            "world_size",
            "`any` (a sample kernel serves every world size)",
            format!("`{}`", sidecar.world_size),
        ));
    }
    // Exactly the targets deploy writes: cpu, and cuda when the sidecar has a cuda part.
    let targets: &[&str] = if sidecar.cuda.is_some() {
        &["cpu", "cuda"]
    } else {
        &["cpu"]
    };
    if sidecar.targets != targets {
        return Err(field(
            "targets",
            format!(
                "{targets:?} (the sidecar {} `cuda` part)",
                if sidecar.cuda.is_some() {
                    "has a"
                } else {
                    "has no"
                }
            ),
            format!("{:?}", sidecar.targets),
        ));
    }
    let ap = dir.join("cpu").join(format!("{name}.eir"));
    let art = read_text(&ap)?;
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
    // The sidecar holds the category the plan ran by: the inferred one, or a stricter one the
    // kernel declared (docs/plans.md), never a looser one.
    let inferred = ir::access_category(f)?.category;
    let category = match AccessCategory::parse(&sidecar.category) {
        Some(c) if c.admits(inferred) => c,
        _ => {
            return Err(field(
                "category",
                format!("`{inferred}` (inferred from the artifact) or a stricter category"),
                format!("`{}`", sidecar.category),
            ))
        }
    };
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
