package tensor

// Quant describes MLX affine quantization: w = scale*q + bias per group of
// GroupSize consecutive input elements; q is Bits wide, packed as one
// LSB-first bit stream per output row into little-endian uint32 words.
//
// Mode "" (or "affine") is that; the floating-point modes ("mxfp4",
// "nvfp4", "mxfp8", package quant) store w = element*scale with one uint8
// scale per group (ScaleDType U8) and no Biases.
type Quant struct {
	Bits, GroupSize int
	Scales, Biases  []byte // [.., out, in/GroupSize] of ScaleDType
	ScaleDType      DType
	Mode            string
}

// Host is a parameter in host memory, as read from a checkpoint or built
// synthetically, ready to hand to a backend. Data may be a view of a
// memory-mapped file: backends copy what they keep.
type Host struct {
	Name  string // checkpoint tensor name, for error messages
	Shape []int  // logical (dequantized) shape
	DType DType  // element type of Data when Quant is nil
	Data  []byte // raw little-endian elements, or packed words when Quant != nil
	Quant *Quant
}
