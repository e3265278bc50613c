"""Layer: ops. Building blocks written once against ``mpcnet.schemes.base.Scheme``."""
