//! Kernels that return values (`fn twice(x: Tensor<f32, 8>) -> Tile<f32, 1, 8>`): a call with
//! a value is the callee's body built in place, at the call site, with its parameters bound to
//! the arguments and its tail expression as the call's value (the macros' `Returns::expand`,
//! after CubeCL's expansion). The IR has no call with results: the backends see the inlined
//! ops, so a returned tile costs no copy and every backend computes the same bits.

use super::*;

/// Implemented by `#[eagle::kernel]` for a compute kernel with a return type: builds its body
/// into the caller at each call that uses its value.
#[diagnostic::on_unimplemented(
    message = "`{Self}` returns nothing, so a call of it has no value",
    label = "an eagle function without a return type",
    note = "give the kernel a return type (`-> Tile<f32, M, N>`, `-> f32`, a tuple) and end its body with the value, or call it as a statement and write the result into an `Out` tensor"
)]
pub trait Returns: crate::EagleFn {
    /// The types the kernel returns, in order (one, or a tuple's elements).
    fn returns() -> Vec<Type>;

    /// Builds the kernel's body into `f` with its parameters bound to `args`; returns its
    /// values, one per element of [`Returns::returns`].
    ///
    /// # Errors
    /// [`IrError::Build`] for an argument of the wrong count or type, or a body that does not
    /// build; [`IrError::Recursion`] when the kernel is being built already (it calls itself).
    fn expand(f: &mut FunctionBuilder<'_>, args: Vec<Operand>) -> Result<Vec<Value>>;
}

impl FunctionBuilder<'_> {
    /// Starts building returning kernel `callee` in place: checks that it is not being built
    /// already and binds `args` to its parameters (`params`: name and type, in order). Each
    /// argument is resolved against its parameter's dtype (a literal takes it) and must have
    /// the parameter's type. End with [`FunctionBuilder::expand_end`].
    ///
    /// # Errors
    /// [`IrError::Recursion`] for a kernel that calls itself; [`IrError::Build`] for a wrong
    /// argument count or type, naming the parameter, both types and the call's source line.
    pub fn expand_begin(
        &mut self,
        callee: &str,
        params: &[(&str, Type)],
        args: Vec<Operand>,
    ) -> Result<Vec<Value>> {
        if params.len() != args.len() {
            return self.err(format!(
                "`{callee}` takes {} argument(s), found {}{}",
                params.len(),
                args.len(),
                self.here()
            ));
        }
        let mut vals = Vec::with_capacity(args.len());
        for (a, (name, t)) in args.into_iter().zip(params) {
            let v = self.value(a, t.dtype())?;
            if !crate::typing::types_compatible(self.ty(v), t) {
                return self.err(format!(
                    "`{callee}`'s parameter `{name}` is `{t}`, but the argument is `{}`{}; pass a value of the parameter's type",
                    self.ty(v),
                    self.here()
                ));
            }
            vals.push(v);
        }
        self.m.begin(callee)?;
        Ok(vals)
    }

    /// Ends what [`FunctionBuilder::expand_begin`] started (whether the body built or not).
    pub fn expand_end(&mut self) {
        self.m.in_progress.pop();
    }

    /// The value `op` that the body of returning kernel `callee` ends with, as element `index`
    /// of its result: resolved against the declared type's dtype (a literal takes it) and
    /// checked against `ty`.
    ///
    /// # Errors
    /// [`IrError::Build`] when the value's type differs from the declared one, naming both
    /// and the source line.
    pub fn returned(
        &mut self,
        callee: &str,
        index: usize,
        op: impl Into<Operand>,
        ty: &Type,
    ) -> Result<Value> {
        let v = self.value(op, ty.dtype())?;
        if !crate::typing::types_compatible(self.ty(v), ty) {
            let which = if index == 0 {
                String::new()
            } else {
                format!(" (element {index})")
            };
            return self.err(format!(
                "`{callee}` is declared to return `{ty}`{which}, but its body ends with `{}`{}; change the return type or convert the value",
                self.ty(v),
                self.here()
            ));
        }
        Ok(v)
    }

    /// The one value of a call of `callee` used as an expression.
    ///
    /// # Errors
    /// [`IrError::Build`] when `callee` returns a tuple: bind it with `let (a, b) = ...`.
    pub fn single_result(&self, callee: &str, vals: Vec<Value>) -> Result<Value> {
        match vals.as_slice() {
            [v] => Ok(*v),
            _ => self.err(format!(
                "`{callee}` returns {} values{}; bind them with `let (a, b, ...) = {callee}(...);`",
                vals.len(),
                self.here()
            )),
        }
    }

    /// The values of a call of `callee` bound by a tuple pattern of `n` names.
    ///
    /// # Errors
    /// [`IrError::Build`] when `callee` returns another number of values.
    pub fn tuple_result(&self, callee: &str, vals: Vec<Value>, n: usize) -> Result<Vec<Value>> {
        if vals.len() == n {
            return Ok(vals);
        }
        self.err(format!(
            "`{callee}` returns {} but the pattern binds {n}{}; bind one name (or `_`) per value",
            match vals.len() {
                1 => "1 value".to_string(),
                k => format!("{k} values"),
            },
            self.here()
        ))
    }
}
