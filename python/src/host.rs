//! Host programs from Python: `load_host` (a program that `eagle::plugin::deploy_host` wrote)
//! and `Session` (a world of devices given as on the runner's command line, `"0,1,2,3"`),
//! whose `launch` takes numpy arrays for tensors (outputs written in place) and Python numbers
//! for scalars, in the program's parameter order.

use super::{err, EagleError};
use eagle::ir::{Const, DType};
use eagle::Arg;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyTuple};
use std::borrow::Cow;
use std::path::PathBuf;

/// A host program loaded from a plugin directory.
#[pyclass(module = "eagle._eagle", frozen)]
struct HostProgram {
    loaded: eagle::plugin::LoadedHost,
}

#[pymethods]
impl HostProgram {
    /// The host function's name.
    #[getter]
    fn name(&self) -> String {
        self.loaded.name.clone()
    }
    /// Its parameters: `(name, dtype, shape, is_output)` each (`shape` empty for a scalar).
    #[getter]
    fn params(&self) -> Vec<(String, String, Vec<String>, bool)> {
        self.loaded
            .sidecar
            .params
            .iter()
            .map(|p| (p.name.clone(), p.dtype.clone(), p.shape.clone(), p.out))
            .collect()
    }
    fn __repr__(&self) -> String {
        format!("<eagle host program `{}`>", self.loaded.name)
    }
}

/// Loads host program `name` of the plugin in `path` (`name` may be left out when the plugin
/// holds one host program).
#[pyfunction]
#[pyo3(signature = (path, name=None))]
fn load_host(path: PathBuf, name: Option<String>) -> PyResult<HostProgram> {
    let name = match name {
        Some(n) => n,
        None => {
            let mp = path.join("manifest.json");
            let hosts = eagle::plugin::host_programs(&path).map_err(err)?;
            match hosts.as_slice() {
                [one] => one.clone(),
                _ => {
                    return Err(EagleError::new_err(format!(
                        "plugin `{}` ({}) holds the host programs {hosts:?}: pass `name=` to choose one",
                        path.display(),
                        mp.display()
                    )))
                }
            }
        }
    };
    let loaded = eagle::plugin::load_host(&path, &name).map_err(err)?;
    Ok(HostProgram { loaded })
}

/// A world of devices on a platform.
#[pyclass(module = "eagle._eagle", frozen)]
struct Session {
    session: eagle::Session,
}

/// The devices of `devices`: a list of ids, a count, or the runner's `-d` text (`"0,1,2,3"`).
fn device_list(devices: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    if let Ok(n) = devices.extract::<usize>() {
        return Ok((0..n).collect());
    }
    if let Ok(v) = devices.extract::<Vec<usize>>() {
        return Ok(v);
    }
    let text: String = devices.extract().map_err(|_| {
        PyTypeError::new_err(
            "argument `devices`: expected a device list such as \"0,1,2,3\", [0, 1, 2, 3] or a count",
        )
    })?;
    text.split(',')
        .map(|d| {
            d.trim().parse::<usize>().map_err(|_| {
                PyValueError::new_err(format!(
                    "argument `devices`: expected comma-separated device ids such as \"0,1,2,3\", found `{text}`"
                ))
            })
        })
        .collect()
}

/// The eagle dtype of numpy dtype name `np` (`float64`, ...).
fn dtype_of(np: &str) -> Option<DType> {
    Some(match np {
        "float64" => DType::F64,
        "float32" => DType::F32,
        "float16" => DType::F16,
        "int64" => DType::I64,
        "int32" => DType::I32,
        "uint64" => DType::U64,
        "uint32" => DType::U32,
        "bool" => DType::Bool,
        _ => return None,
    })
}

/// One launch argument as Python gave it: a tensor's shape, dtype and bytes (with the array
/// to write back into for an output), or a scalar.
enum Given {
    Tensor(Vec<usize>, DType, Vec<u8>, bool),
    Scalar(Const, DType),
}

/// Argument `name` (parameter `p`) from `v`.
fn given(p: &eagle::plugin::PlaneSig, v: &Bound<'_, PyAny>) -> PyResult<Given> {
    let want = p.dtype.as_str();
    let dt = DType::from_name(want).ok_or_else(|| {
        EagleError::new_err(format!("parameter `{}`: unknown dtype {want}", p.name))
    })?;
    if p.shape.is_empty() {
        let c = if v.is_instance_of::<PyBool>() {
            Const::Bool(v.extract()?)
        } else if v.is_instance_of::<PyInt>() {
            Const::Int(v.extract::<i128>()?)
        } else if v.is_instance_of::<PyFloat>() {
            match dt {
                DType::F32 => Const::F32(v.extract::<f64>()? as f32),
                _ => Const::F64(v.extract()?),
            }
        } else {
            return Err(PyTypeError::new_err(format!(
                "argument `{}`: expected a Python number ({want}), found {}",
                p.name,
                v.get_type()
            )));
        };
        return Ok(Given::Scalar(c, dt));
    }
    let np_dtype: String = v
        .getattr("dtype")
        .and_then(|d| d.getattr("name"))
        .and_then(|n| n.extract())
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "argument `{}`: expected a numpy array of {want}, found {}",
                p.name,
                v.get_type()
            ))
        })?;
    if dtype_of(&np_dtype) != Some(dt) {
        return Err(PyTypeError::new_err(format!(
            "argument `{}`: expected a numpy array of {want}, found {np_dtype}",
            p.name
        )));
    }
    let native: bool = v.getattr("dtype")?.getattr("isnative")?.extract()?;
    if !native {
        return Err(PyTypeError::new_err(format!(
            "argument `{}`: expected {want} in this machine's byte order, found a byte-swapped array; convert it with `.astype(numpy.{np_dtype})`",
            p.name
        )));
    }
    let shape: Vec<usize> = v.getattr("shape")?.extract()?;
    if p.out {
        let c: bool = v.getattr("flags")?.get_item("C_CONTIGUOUS")?.extract()?;
        let w: bool = v.getattr("flags")?.get_item("WRITEABLE")?.extract()?;
        if !c || !w {
            return Err(PyValueError::new_err(format!(
                "argument `{}`: outputs must be writeable C-contiguous arrays (written in place); pass `numpy.ascontiguousarray(...)` and read the result from it",
                p.name
            )));
        }
    }
    // `tobytes()` is row-major whatever the layout.
    let bytes: Vec<u8> = v
        .call_method0("tobytes")?
        .cast::<PyBytes>()?
        .as_bytes()
        .to_vec();
    Ok(Given::Tensor(shape, dt, bytes, p.out))
}

#[pymethods]
impl Session {
    /// A world of `devices` (a list of ids, a count, or `"0,1,2,3"` as the runner's `-d`
    /// takes) on `platform` (`sim`, the default, `cpu` or `cuda`).
    #[new]
    #[pyo3(signature = (devices=None, platform="sim"))]
    fn new(devices: Option<&Bound<'_, PyAny>>, platform: &str) -> PyResult<Session> {
        let devices = match devices {
            Some(d) => device_list(d)?,
            None => vec![0, 1],
        };
        let platform = eagle::Platform::parse(platform).map_err(|e| err(e.into()))?;
        let session = eagle::Session::new(platform, devices).map_err(err)?;
        Ok(Session { session })
    }
    /// The world size.
    #[getter]
    fn world_size(&self) -> usize {
        self.session.world_size()
    }
    /// Launches `program` with `args` in its parameter order: numpy arrays of the parameter's
    /// dtype for tensors (outputs: writeable, C-contiguous, written in place) and Python
    /// numbers for scalars. Returns the run time in seconds.
    #[pyo3(signature = (program, *args))]
    fn launch(
        &self,
        py: Python<'_>,
        program: &HostProgram,
        args: &Bound<'_, PyTuple>,
    ) -> PyResult<f64> {
        let params = &program.loaded.sidecar.params;
        if args.len() != params.len() {
            let names: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
            return Err(PyTypeError::new_err(format!(
                "`{}` takes {} arguments {names:?}, found {}",
                program.loaded.name,
                params.len(),
                args.len()
            )));
        }
        let mut given = vec![];
        for (p, v) in params.iter().zip(args.iter()) {
            given.push(self::given(p, &v)?);
        }
        let s = &self.session;
        let loaded = &program.loaded;
        let report = py.detach(|| {
            let args: Vec<Arg<'_>> = given
                .iter_mut()
                .map(|g| match g {
                    Given::Tensor(shape, dt, bytes, true) => Arg::Out(shape.clone(), *dt, bytes),
                    Given::Tensor(shape, dt, bytes, false) => {
                        Arg::In(shape.clone(), *dt, Cow::Borrowed(&bytes[..]))
                    }
                    Given::Scalar(c, dt) => Arg::Scalar(*c, *dt),
                })
                .collect();
            loaded.launch(s, args)
        });
        let report = report.map_err(err)?;
        // Outputs back into the caller's arrays.
        let np = py.import("numpy")?;
        for (g, arr) in given.iter().zip(args.iter()) {
            if let Given::Tensor(shape, _, bytes, true) = g {
                let dtype = arr.getattr("dtype")?;
                let flat = np.call_method1("frombuffer", (PyBytes::new(py, bytes), dtype))?;
                let shaped = flat.call_method1("reshape", (PyTuple::new(py, shape)?,))?;
                arr.set_item(py.Ellipsis(), shaped)?;
            }
        }
        Ok(report.run.run_time.as_secs_f64())
    }
    fn __repr__(&self) -> String {
        format!(
            "<eagle session: {} devices {:?} on {}>",
            self.session.world_size(),
            self.session.devices(),
            self.session.platform().name()
        )
    }
}

/// Adds the host-program classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<HostProgram>()?;
    m.add_class::<Session>()?;
    m.add_function(wrap_pyfunction!(load_host, m)?)?;
    Ok(())
}
