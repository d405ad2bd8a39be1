"""PEtab problems (`sbmlgpu petab`, `sbmlgpu.petab`)."""
