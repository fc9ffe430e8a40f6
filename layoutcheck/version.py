"""layoutcheck's version, in a module of its own: any module can import it without loading the package's exports."""

__version__ = "0.1.0"
