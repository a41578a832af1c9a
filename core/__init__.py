"""The foundation every package stands on: the one error tree (core.errors), params.yaml and the environment as code
(core.params, core.runtime), the night's days, progress lines, figures, the reference's rows and the Dask session."""
