"""layoutcheck's lint rules: one rule per module, found by walking this package."""
