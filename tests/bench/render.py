def render(results, out):
    pass
