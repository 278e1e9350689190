//! `eagle._eagle`: the native half of the `eagle` Python package (the Python half is
//! `python/eagle/`). It exposes eagle's execution plans over deployed plugins, the
//! `RankPartition` world and its gathers, and host programs deployed as plugins, with numpy
//! arrays for planes and tensors. Every eagle error becomes a Python exception carrying eagle's
//! message: `EagleError` (a `RuntimeError`), `TypeError` for a plane of the wrong dtype,
//! `ValueError` for a plane of the wrong layout or shape.

use eagle::plan::{Partition as RsPartition, Planes, RankPartition as RsRank, Structure};
use eagle::Tensor;
use numpy::{
    PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArrayMethods, ToPyArray as _,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyRange};
use std::collections::BTreeMap;
use std::path::PathBuf;

create_exception!(
    _eagle,
    EagleError,
    PyRuntimeError,
    "An error eagle returned (its message names the source line, the argument and the fix)."
);

/// An eagle error as a Python exception.
fn err(e: eagle::Error) -> PyErr {
    EagleError::new_err(e.to_string())
}

/// The message of a `RankPartition` call in a build without the MPI extension.
const NO_MPI: &str = "built without the MPI extension: rebuild eagle's Python package with the `mpi` feature (`maturin develop --release --features mpi` in python/, or `pip install ./python --config-settings=build-args=--features=mpi`), with an MPI installed";

fn require_mpi(what: &str) -> PyResult<()> {
    if RsRank::available() {
        Ok(())
    } else {
        Err(PyRuntimeError::new_err(format!("{what}: {NO_MPI}")))
    }
}

/// A kernel loaded from a plugin directory that eagle deployed (`eagle::plugin::deploy`).
#[pyclass(module = "eagle._eagle", frozen)]
struct Plugin {
    loaded: eagle::plugin::Loaded,
    dir: PathBuf,
}

#[pymethods]
impl Plugin {
    /// The kernel's name.
    #[getter]
    fn name(&self) -> String {
        self.loaded.name.clone()
    }
    /// The kernel's access category (`sample_local`, `mapreduce(sum)`, ...).
    #[getter]
    fn category(&self) -> String {
        self.loaded.sidecar.category.clone()
    }
    /// The planes after the sample index: `(name, dtype, shape, is_output)` each.
    #[getter]
    fn signature(&self) -> Vec<(String, String, Vec<String>, bool)> {
        self.loaded
            .sidecar
            .signature
            .iter()
            .map(|p| (p.name.clone(), p.dtype.clone(), p.shape.clone(), p.out))
            .collect()
    }
    fn __repr__(&self) -> String {
        format!(
            "<eagle plugin `{}` ({}) from {}>",
            self.loaded.name,
            self.loaded.sidecar.category,
            self.dir.display()
        )
    }
}

/// Loads kernel `name` of the plugin in directory `path` (`name` may be left out when the
/// plugin holds one kernel).
#[pyfunction]
#[pyo3(signature = (path, name=None))]
fn load_plugin(path: PathBuf, name: Option<String>) -> PyResult<Plugin> {
    let name = match name {
        Some(n) => n,
        None => {
            let ks = eagle::plugin::kernels(&path).map_err(err)?;
            match ks.as_slice() {
                [one] => one.clone(),
                [] => {
                    let hosts = eagle::plugin::host_programs(&path).map_err(err)?;
                    return Err(EagleError::new_err(format!(
                        "plugin `{}` holds no sample kernel, only the host programs {hosts:?}: load those with `eagle.load_host`",
                        path.display()
                    )));
                }
                _ => {
                    return Err(EagleError::new_err(format!(
                        "plugin `{}` holds the kernels {ks:?}: pass `name=` to choose one",
                        path.display()
                    )))
                }
            }
        }
    };
    let loaded = eagle::plugin::load(&path, &name).map_err(err)?;
    Ok(Plugin { loaded, dir: path })
}

fn structure(name: &str) -> PyResult<Structure> {
    match name {
        "HostTeam" => Ok(Structure::HostTeam),
        "DeviceKernel" => Ok(Structure::DeviceKernel),
        "RankPartition" => Ok(Structure::RankPartition),
        other => Err(PyValueError::new_err(format!(
            "structure `{other}`: expected `HostTeam`, `DeviceKernel` or `RankPartition` (eagle.exec)"
        ))),
    }
}

/// A sample kernel with a structure: the plan of `eagle.plan.plan`.
#[pyclass(module = "eagle._eagle", frozen)]
struct Plan {
    plan: eagle::plan::Plan,
    sig: Vec<eagle::plugin::PlaneSig>,
    structure: Structure,
}

/// Plans `plugin` with `structure` and `inner` (names of `eagle.exec` structures).
/// `threads` sets HostTeam's worker count; `simulated_ranks` runs a `RankPartition` over that
/// many ranks in this process instead of MPI.
#[pyfunction]
#[pyo3(signature = (plugin, structure="HostTeam", inner="HostTeam", threads=None, simulated_ranks=None, platform="sim"))]
fn plan(
    plugin: &Plugin,
    structure: &str,
    inner: &str,
    threads: Option<usize>,
    simulated_ranks: Option<usize>,
    platform: &str,
) -> PyResult<Plan> {
    let (s, i) = (self::structure(structure)?, self::structure(inner)?);
    let mut p = plugin.loaded.plan(s, i).map_err(err)?;
    if let Some(t) = threads {
        p = p.with_threads(t);
    }
    if let Some(r) = simulated_ranks {
        p = p.with_simulated_ranks(r);
    }
    let platform = eagle::Platform::parse(platform).map_err(|e| err(e.into()))?;
    p = p.with_platform(platform);
    Ok(Plan {
        plan: p,
        sig: plugin.loaded.sidecar.signature.clone(),
        structure: s,
    })
}

/// The input planes by name, and the dims their shapes bind.
type Inputs = (Vec<(String, Input)>, BTreeMap<String, usize>);

/// An output plane: its name, the tensor the run writes, and the caller's array, if given.
type Output<'py> = (String, Tensor<f64>, Option<Bound<'py, PyAny>>);

/// One input plane, copied into a tensor of the kernel's dtype, or a scalar uniform.
enum Input {
    F64(Tensor<f64>),
    F32(Tensor<f32>),
    I64(Tensor<i64>),
    I32(Tensor<i32>),
    /// A scalar parameter's value (`eagle::plan::Planes::uniform`).
    Uniform(Uniform),
}

/// A scalar uniform from a Python number, in the parameter's dtype.
#[derive(Clone, Copy)]
enum Uniform {
    F64(f64),
    F32(f32),
    I64(i64),
    I32(i32),
    Index(usize),
    Bool(bool),
}

/// `v` as uniform `name` of dtype `dtype`, or the TypeError naming both.
fn uniform_of(name: &str, dtype: &str, v: &Bound<'_, PyAny>) -> PyResult<Uniform> {
    let bad = |_| {
        PyTypeError::new_err(format!(
            "uniform `{name}`: expected one {dtype} value (a Python number), found {}",
            v.get_type()
        ))
    };
    Ok(match dtype {
        "f64" => Uniform::F64(v.extract().map_err(bad)?),
        "f32" => Uniform::F32(v.extract::<f64>().map_err(bad)? as f32),
        "i64" => Uniform::I64(v.extract().map_err(bad)?),
        "i32" => Uniform::I32(v.extract().map_err(bad)?),
        "index" => Uniform::Index(v.extract().map_err(bad)?),
        "bool" => Uniform::Bool(v.extract().map_err(bad)?),
        other => {
            return Err(PyTypeError::new_err(format!(
                "uniform `{name}`: dtype {other} is not supported from Python (f64, f32, i64, i32, index, bool are)"
            )))
        }
    })
}

/// `arr` as a tensor of `T`, or the TypeError naming the plane and both dtypes.
fn tensor_of<T: numpy::Element + eagle::Element + Copy>(
    name: &str,
    want: &str,
    arr: &Bound<'_, PyAny>,
) -> PyResult<Tensor<T>> {
    let a: PyReadonlyArrayDyn<'_, T> = arr.extract().map_err(|_| {
        let found = arr
            .getattr("dtype")
            .map(|d| d.to_string())
            .unwrap_or_else(|_| arr.get_type().to_string());
        PyTypeError::new_err(format!(
            "plane `{name}`: expected a numpy array of {want}, found {found}; convert it with `.astype(numpy.{})`",
            numpy_name(want)
        ))
    })?;
    let shape = a.shape().to_vec();
    let data: Vec<T> = a.as_array().iter().copied().collect();
    Tensor::from_vec(&shape, data).map_err(|e| err(e.into()))
}

fn numpy_name(dtype: &str) -> &str {
    match dtype {
        "f64" => "float64",
        "f32" => "float32",
        "i64" => "int64",
        "i32" => "int32",
        other => other,
    }
}

impl Plan {
    /// The inputs of `planes`, checked against the signature (every input given, no unknown
    /// name), and the dims their shapes bind.
    fn inputs(&self, planes: &Bound<'_, PyDict>) -> PyResult<Inputs> {
        for (k, _) in planes.iter() {
            let k: String = k.extract()?;
            if !self.sig.iter().any(|p| p.name == k) {
                let names: Vec<&str> = self.sig.iter().map(|p| p.name.as_str()).collect();
                return Err(PyValueError::new_err(format!(
                    "plane `{k}`: the kernel has no such plane; its planes are {names:?}"
                )));
            }
        }
        let mut dims = BTreeMap::new();
        let mut inputs = vec![];
        for p in self.sig.iter().filter(|p| !p.out) {
            if p.shape.is_empty() {
                let Some(v) = planes.get_item(&p.name)? else {
                    return Err(PyValueError::new_err(format!(
                        "uniform `{}`: missing; pass its value as `{}=<{}>`",
                        p.name, p.name, p.dtype
                    )));
                };
                let u = uniform_of(&p.name, &p.dtype, &v)?;
                inputs.push((p.name.clone(), Input::Uniform(u)));
                continue;
            }
            let Some(arr) = planes.get_item(&p.name)? else {
                return Err(PyValueError::new_err(format!(
                    "plane `{}`: missing; pass it as `{}=<numpy array of {}>`",
                    p.name,
                    p.name,
                    numpy_name(&p.dtype)
                )));
            };
            let t = match p.dtype.as_str() {
                "f64" => Input::F64(tensor_of(&p.name, &p.dtype, &arr)?),
                "f32" => Input::F32(tensor_of(&p.name, &p.dtype, &arr)?),
                "i64" => Input::I64(tensor_of(&p.name, &p.dtype, &arr)?),
                "i32" => Input::I32(tensor_of(&p.name, &p.dtype, &arr)?),
                other => {
                    return Err(PyTypeError::new_err(format!(
                        "plane `{}`: dtype {other} is not supported from Python (f64, f32, i64, i32 are)",
                        p.name
                    )))
                }
            };
            let shape = match &t {
                Input::F64(t) => t.shape().to_vec(),
                Input::F32(t) => t.shape().to_vec(),
                Input::I64(t) => t.shape().to_vec(),
                Input::I32(t) => t.shape().to_vec(),
                Input::Uniform(_) => vec![],
            };
            for (d, &n) in p.shape.iter().zip(&shape) {
                if d.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && !d.chars().all(|c| c.is_ascii_digit())
                {
                    dims.entry(d.clone()).or_insert(n);
                }
            }
            inputs.push((p.name.clone(), t));
        }
        Ok((inputs, dims))
    }

    /// The outputs: the caller's arrays (float64, C-contiguous, refused by name otherwise),
    /// or new zero planes of the signature's shape.
    fn outputs<'py>(
        &self,
        planes: &Bound<'py, PyDict>,
        dims: &BTreeMap<String, usize>,
    ) -> PyResult<Vec<Output<'py>>> {
        let mut outs = vec![];
        for p in self.sig.iter().filter(|p| p.out) {
            if p.dtype != "f64" {
                return Err(PyTypeError::new_err(format!(
                    "plane `{}`: the kernel writes {}, but outputs returned to Python must be float64; declare the plane f64",
                    p.name, p.dtype
                )));
            }
            match planes.get_item(&p.name)? {
                Some(arr) => {
                    let a: &Bound<'py, PyArrayDyn<f64>> = arr.cast().map_err(|_| {
                        let found = arr
                            .getattr("dtype")
                            .map(|d| d.to_string())
                            .unwrap_or_else(|_| arr.get_type().to_string());
                        PyTypeError::new_err(format!(
                            "plane `{}`: outputs must be numpy arrays of float64, found {found}",
                            p.name
                        ))
                    })?;
                    if a.try_readwrite().is_err() {
                        return Err(PyValueError::new_err(format!(
                            "plane `{}`: outputs are written in place, but this array is read-only; pass a writeable array (`.copy()`)",
                            p.name
                        )));
                    }
                    if !a.is_c_contiguous() {
                        return Err(PyValueError::new_err(format!(
                            "plane `{}`: outputs must be C-contiguous; pass `numpy.ascontiguousarray(...)` and read the result from it",
                            p.name
                        )));
                    }
                    let ro = a.readonly();
                    let data = ro
                        .as_slice()
                        .map_err(|e| PyValueError::new_err(e.to_string()))?;
                    let t =
                        Tensor::from_vec(a.shape(), data.to_vec()).map_err(|e| err(e.into()))?;
                    outs.push((p.name.clone(), t, Some(arr.clone())));
                }
                None => {
                    let mut shape = vec![];
                    for d in &p.shape {
                        let n = match d.parse::<usize>() {
                            Ok(n) => n,
                            Err(_) => *dims.get(d).ok_or_else(|| {
                                PyValueError::new_err(format!(
                                    "plane `{}`: its dim `{d}` is not the dim of an input plane; pass the output as `{}=numpy.zeros(...)`",
                                    p.name, p.name
                                ))
                            })?,
                        };
                        shape.push(n);
                    }
                    outs.push((p.name.clone(), Tensor::zeros(&shape), None));
                }
            }
        }
        Ok(outs)
    }
}

#[pymethods]
impl Plan {
    /// Runs the plan on `device` with the planes by name: inputs (numpy arrays of the kernel's
    /// dtypes), and outputs either passed (float64, C-contiguous: written in place) or made
    /// (zeros of the signature's shape). Returns the output plane (a dict of them when the
    /// kernel has several); under `RankPartition` every rank returns the whole plane.
    #[pyo3(signature = (device=0, **planes))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        device: usize,
        planes: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        if self.structure == Structure::RankPartition && !RsRank::available() {
            // A plan over simulated ranks needs no MPI.
            if self.plan.simulated_ranks().is_none() {
                require_mpi("RankPartition plan run")?;
            }
        }
        let empty = PyDict::new(py);
        let planes = planes.unwrap_or(&empty);
        let (inputs, dims) = self.inputs(planes)?;
        let mut outs = vec![];
        let mut given = vec![];
        for (n, t, g) in self.outputs(planes, &dims)? {
            outs.push((n, t));
            given.push(g);
        }
        let plan = &self.plan;
        let r = py.detach(|| {
            let mut ps = Planes::new();
            for (n, t) in &inputs {
                ps = match t {
                    Input::F64(t) => ps.input(n, t),
                    Input::F32(t) => ps.input(n, t),
                    Input::I64(t) => ps.input(n, t),
                    Input::I32(t) => ps.input(n, t),
                    Input::Uniform(u) => match *u {
                        Uniform::F64(v) => ps.uniform(n, v),
                        Uniform::F32(v) => ps.uniform(n, v),
                        Uniform::I64(v) => ps.uniform(n, v),
                        Uniform::I32(v) => ps.uniform(n, v),
                        Uniform::Index(v) => ps.uniform(n, v),
                        Uniform::Bool(v) => ps.uniform(n, v),
                    },
                };
            }
            for (n, t) in outs.iter_mut() {
                ps = ps.output(n, t);
            }
            plan.run(device, &mut ps)
        });
        r.map_err(err)?;
        let result = PyDict::new(py);
        let mut last = None;
        for ((n, t), given) in outs.into_iter().zip(given) {
            let arr: Bound<'py, PyAny> = match given {
                Some(a) => {
                    let a: &Bound<'py, PyArrayDyn<f64>> = a.cast()?;
                    let mut rw = a
                        .try_readwrite()
                        .map_err(|e| PyValueError::new_err(format!("plane `{n}`: {e}")))?;
                    rw.as_slice_mut()
                        .map_err(|e| PyValueError::new_err(e.to_string()))?
                        .copy_from_slice(t.data());
                    a.clone().into_any()
                }
                None => {
                    let flat = t.data().to_pyarray(py);
                    flat.reshape(t.shape())?.into_any()
                }
            };
            result.set_item(&n, &arr)?;
            last = Some(arr);
        }
        match (result.len(), last) {
            (1, Some(a)) => Ok(a.unbind()),
            _ => Ok(result.into_any().unbind()),
        }
    }
    /// The kernel's access category.
    #[getter]
    fn category(&self) -> String {
        self.plan.category().to_string()
    }
    fn __repr__(&self) -> String {
        format!(
            "<eagle plan of `{}` ({:?})>",
            self.plan.kernel(),
            self.structure
        )
    }
}

/// A contiguous block partition of `n` items over `parts` ranks: the first `n % parts`
/// blocks are one longer.
#[pyclass(module = "eagle._eagle", frozen, eq)]
#[derive(PartialEq)]
struct Partition {
    inner: RsPartition,
}

#[pymethods]
impl Partition {
    #[new]
    fn new(n: usize, parts: usize) -> PyResult<Partition> {
        if n > isize::MAX as usize {
            return Err(PyValueError::new_err(format!(
                "argument `n`: expected at most {} items, found {n}",
                isize::MAX
            )));
        }
        if parts == 0 {
            return Err(PyValueError::new_err(
                "argument `parts`: expected at least 1, found 0",
            ));
        }
        Ok(Partition {
            inner: RsPartition::new(n, parts),
        })
    }
    /// Items.
    #[getter]
    fn n(&self) -> usize {
        self.inner.n
    }
    /// Blocks.
    #[getter]
    fn parts(&self) -> usize {
        self.inner.parts
    }
    /// Block `r` as a `range`.
    fn share<'py>(&self, py: Python<'py>, r: usize) -> PyResult<Bound<'py, PyRange>> {
        if r >= self.inner.parts {
            return Err(PyValueError::new_err(format!(
                "argument `r`: expected a block below {}, found {r}",
                self.inner.parts
            )));
        }
        let s = self.inner.share(r);
        PyRange::new(py, s.start as isize, s.end as isize)
    }
    fn __repr__(&self) -> String {
        format!("Partition(n={}, parts={})", self.inner.n, self.inner.parts)
    }
}

/// Whether this build has the MPI extension.
#[pyfunction]
fn rank_partition_available() -> bool {
    RsRank::available()
}

/// `(rank, size)` of this process: `(0, 1)` without `mpirun`.
#[pyfunction]
fn rank_partition_world() -> PyResult<(usize, usize)> {
    require_mpi("RankPartition.world")?;
    Ok(RsRank::world())
}

/// This rank's share of `partition`, as a `range`.
#[pyfunction]
fn rank_partition_local<'py>(
    py: Python<'py>,
    partition: &Partition,
) -> PyResult<Bound<'py, PyRange>> {
    require_mpi("RankPartition.local")?;
    let s = RsRank::local(&partition.inner);
    PyRange::new(py, s.start as isize, s.end as isize)
}

/// Every rank's share of a plane, gathered in sample order on every rank.
#[pyfunction]
fn rank_partition_allgather_plane<'py>(
    py: Python<'py>,
    local: PyReadonlyArrayDyn<'py, f64>,
    partition: &Partition,
) -> PyResult<Bound<'py, PyAny>> {
    require_mpi("RankPartition.allgather_plane")?;
    let local: Vec<f64> = local.as_array().iter().copied().collect();
    let p = partition.inner;
    let out = py
        .detach(|| RsRank::allgather_plane(&local, &p))
        .map_err(err)?;
    Ok(out.to_pyarray(py).into_any())
}

/// Every rank's row partials folded in row order with `op` (`sum`, `times` or `max`), the
/// same `cells` values on every rank.
#[pyfunction]
fn rank_partition_allgather_fold<'py>(
    py: Python<'py>,
    local: PyReadonlyArrayDyn<'py, f64>,
    rows: &Partition,
    cells: usize,
    op: &str,
) -> PyResult<Bound<'py, PyAny>> {
    require_mpi("RankPartition.allgather_fold")?;
    let kind = eagle::ir::ReduceKind::from_name(op).ok_or_else(|| {
        PyValueError::new_err(format!(
            "argument `op`: expected `sum`, `times` or `max`, found `{op}`"
        ))
    })?;
    let local: Vec<f64> = local.as_array().iter().copied().collect();
    let p = rows.inner;
    let out = py
        .detach(|| RsRank::allgather_fold(&local, &p, cells, kind))
        .map_err(err)?;
    Ok(out.to_pyarray(py).into_any())
}

mod host;

#[pymodule]
fn _eagle(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Under mpirun, MPI starts before any thread of a run does.
    if RsRank::available() {
        let _ = RsRank::world();
    }
    m.add("EagleError", m.py().get_type::<EagleError>())?;
    m.add_class::<Plugin>()?;
    m.add_class::<Plan>()?;
    m.add_class::<Partition>()?;
    m.add_function(wrap_pyfunction!(load_plugin, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(rank_partition_available, m)?)?;
    m.add_function(wrap_pyfunction!(rank_partition_world, m)?)?;
    m.add_function(wrap_pyfunction!(rank_partition_local, m)?)?;
    m.add_function(wrap_pyfunction!(rank_partition_allgather_plane, m)?)?;
    m.add_function(wrap_pyfunction!(rank_partition_allgather_fold, m)?)?;
    host::register(m)?;
    Ok(())
}
