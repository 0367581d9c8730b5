from optimizer.cli import app

app(prog_name="optimizer")
