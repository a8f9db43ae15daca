# cmake -DINPUT=file -DOUTPUT=file.inc -P EmbedText.cmake: writes INPUT's text
# as one C++ raw string literal, so that a source can embed a file verbatim.
file(READ "${INPUT}" text)
file(WRITE "${OUTPUT}" "R\"kvjit_embedded(${text})kvjit_embedded\"\n")
