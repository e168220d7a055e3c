package client

// DecodeFrameForTest exposes the frame decoder to the vector test.
func DecodeFrameForTest(data []byte) error {
	_, err := decodeFrame(data)
	return err
}
