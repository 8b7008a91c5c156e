package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunStateShape holds the run workflow's shape: runState has at most
// 20 methods, and no part holds it (a part sees runCore and the
// neighbours it is built with, never the run).
func TestRunStateShape(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Recv != nil && typeName(n.Recv.List[0].Type) == "runState" {
					methods++
				}
			case *ast.TypeSpec:
				st, ok := n.Type.(*ast.StructType)
				if !ok {
					return true
				}
				for _, fld := range st.Fields.List {
					if typeName(fld.Type) == "runState" {
						t.Errorf("%s holds the run (%s): give it runCore and its neighbours", n.Name.Name, fset.Position(fld.Pos()))
					}
				}
			}
			return true
		})
	}
	if methods == 0 || methods > 20 {
		t.Errorf("runState has %d methods, want 1 to 20: a step of its own belongs to a part", methods)
	}
}

func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}
