//! Host programs as plugins: a `#[eagle::host]` function deployed with every function it
//! reaches, loaded and launched later without its source, at any world size (the module is
//! generic; each launch specializes it for its session, as [`crate::Session::launch`] does).

use super::{
    field, hash_of, io, manifest_to_update, param_sigs, read_manifest, read_text, write_manifest,
    PlaneSig,
};
use crate::ir::{self, parse_module, print_module, verify_module, EagleFn};
use crate::{Arg, Error, LaunchReport, Result, Session};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// The sidecar `<name>.host.json` of a host program. Unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSidecar {
    /// The host function's name.
    pub name: String,
    /// Its parameters in order: tensors (`shape` their dims as text, `out` when written) and
    /// scalars (`shape` empty).
    pub params: Vec<PlaneSig>,
    /// `sha256:<hex>` of `host/<name>.eir`.
    pub content_hash: String,
}

/// A host program loaded from a plugin ([`load_host`]), ready to launch on any session.
#[derive(Debug, Clone)]
pub struct LoadedHost {
    /// The host function's name.
    pub name: String,
    /// Its sidecar.
    pub sidecar: HostSidecar,
    module: Arc<ir::Module>,
}

impl LoadedHost {
    /// Launches the program on `session` with `args`, in parameter order (see
    /// [`crate::Session::launch`]).
    ///
    /// # Errors
    /// As [`crate::Session::launch`].
    pub fn launch(&self, session: &Session, args: Vec<Arg<'_>>) -> Result<LaunchReport> {
        session.launch_module(&self.module, &self.name, args)
    }

    /// The generic module (the host function and every function it reaches).
    pub fn module(&self) -> &ir::Module {
        &self.module
    }
}

/// Writes host program `F` to `dir` (created if needed) as a plugin: its generic module, its
/// sidecar, and its name in the manifest (added to what the directory holds).
///
/// # Errors
/// [`Error::Plugin`] naming the path on an I/O failure; build errors of `F`;
/// [`Error::Usage`] when `F` is not a host function.
pub fn deploy_host<F: EagleFn>(_program: F, dir: &Path) -> Result<()> {
    let module = F::module()?;
    let f = module
        .function(F::NAME)
        .filter(|f| f.level == ir::Level::Host)
        .ok_or_else(|| {
            Error::Usage(format!(
                "deploy_host: `{}` is not a host function; deploy sample kernels with `plugin::deploy`",
                F::NAME
            ))
        })?;
    let text = print_module(&module);
    std::fs::create_dir_all(dir.join("host")).map_err(|e| io("cannot create", dir, e))?;
    let art = dir.join("host").join(format!("{}.eir", F::NAME));
    std::fs::write(&art, &text).map_err(|e| io("cannot write", &art, e))?;
    let sidecar = HostSidecar {
        name: F::NAME.to_string(),
        params: param_sigs(f, &f.params),
        content_hash: hash_of(&text),
    };
    let sc = dir.join(format!("{}.host.json", F::NAME));
    let json = serde_json::to_string_pretty(&sidecar).map_err(|e| io("cannot encode", &sc, e))?;
    std::fs::write(&sc, json).map_err(|e| io("cannot write", &sc, e))?;
    let mut manifest = manifest_to_update(dir)?;
    if !manifest.hosts.iter().any(|h| h == F::NAME) {
        manifest.hosts.push(F::NAME.to_string());
    }
    write_manifest(dir, &manifest)
}

/// Loads host program `name` from the plugin in `dir`, checking the manifest, the sidecar
/// against the module (its hash, the function's level and parameters) and the module itself
/// (parsed and verified).
///
/// # Errors
/// [`Error::Plugin`] for a missing or modified file, a program not in the manifest, or a
/// sidecar field that does not match the module (naming the field); IR errors for a module that
/// does not parse or verify.
pub fn load_host(dir: &Path, name: &str) -> Result<LoadedHost> {
    let manifest = read_manifest(dir)?;
    if !manifest.hosts.iter().any(|h| h == name) {
        return Err(Error::Plugin(format!(
            "plugin `{}` has no host program `{name}`; it has {:?}",
            dir.display(),
            manifest.hosts
        )));
    }
    let sp = dir.join(format!("{name}.host.json"));
    let sidecar: HostSidecar =
        serde_json::from_str(&read_text(&sp)?).map_err(|e| io("malformed", &sp, e))?;
    if sidecar.name != name {
        return Err(field(
            "name",
            format!("`{name}`"),
            format!("`{}`", sidecar.name),
        ));
    }
    let text = read_text(&dir.join("host").join(format!("{name}.eir")))?;
    let h = hash_of(&text);
    if h != sidecar.content_hash {
        return Err(field(
            "content_hash",
            format!("`{h}` (the hash of host/{name}.eir)"),
            format!("`{}`", sidecar.content_hash),
        ));
    }
    let module = parse_module(&text)?;
    verify_module(&module)?;
    let f = module
        .function(name)
        .filter(|f| f.level == ir::Level::Host)
        .ok_or_else(|| {
            field(
                "name",
                format!("a host function `{name}` in the module"),
                "none",
            )
        })?;
    let ps = param_sigs(f, &f.params);
    if ps != sidecar.params {
        return Err(field(
            "params",
            format!("{ps:?}"),
            format!("{:?}", sidecar.params),
        ));
    }
    Ok(LoadedHost {
        name: name.to_string(),
        sidecar,
        module: Arc::new(module),
    })
}
