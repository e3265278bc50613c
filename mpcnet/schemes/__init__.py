"""Layer: schemes. Secret-sharing schemes behind one interface (``base.Scheme``)."""
