from optiflow.interfaces.cli import run

run()
