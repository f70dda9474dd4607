# pyenv.sh: the Python the ONNX tests check with (source it).
#
#   dml_pyenv     prints the path of a virtual environment holding ONNX
#                 Runtime, scikit-learn and skl2onnx from PyPI (made on first
#                 use, under build/, with Debian's /usr/bin/python3); nothing
#                 of it goes into the product.  Returns non-zero when it
#                 cannot be made.
# onnx.checker runs on Debian's python3-onnx (/usr/bin/python3) instead.
DML_PYENV=${DML_PYENV:-$PWD/build/pyenv}
DML_PYENV_PKGS="onnxruntime==1.32.0 scikit-learn==1.9.1 skl2onnx==1.20.0 onnx==1.23.2"
dml_pyenv() {
	if [ ! -x "$DML_PYENV/bin/python" ] ||
		! "$DML_PYENV/bin/python" -c 'import onnxruntime, sklearn, skl2onnx' 2>/dev/null; then
		rm -rf "$DML_PYENV"
		/usr/bin/python3 -m venv "$DML_PYENV" >&2 &&
			"$DML_PYENV/bin/pip" install -q --disable-pip-version-check $DML_PYENV_PKGS >&2 ||
			return 1
	fi
	echo "$DML_PYENV"
}
