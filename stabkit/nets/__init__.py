"""The papers' architectures as plain stateless ``torch.nn`` modules (no BatchNorm, no dropout, no buffers),
so the engine can run them through ``functional_call`` and ``vmap`` over clients and pairs."""
